import { createLogger } from '../../src/log.ts';
import { LocalTransport } from '../../src/runtime/local-transport.ts';
import { runtimeContract } from './runtime-contract.ts';

runtimeContract('local', async (cfg) => new LocalTransport(cfg, createLogger('silent')));
