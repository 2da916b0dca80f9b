import { Type } from '@sinclair/typebox';
import { defineActor, defineProtocol } from '../../src/runtime/actor.ts';

/** The chaos test's counter actor: `add` carries the per-key sequence number. */
export const counterProtocol = defineProtocol('counter', { add: { seq: Type.Integer({ minimum: 1 }) } });

/** What a sender registers: the protocol, no handlers run here. */
export const counterSender = defineActor(counterProtocol, { handlers: { add: () => {} } });
