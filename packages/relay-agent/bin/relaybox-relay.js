#!/usr/bin/env node
// The agent is TypeScript run as is: tsx compiles it on load.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli.ts');
