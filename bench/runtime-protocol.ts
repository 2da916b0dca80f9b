import { Type } from '@sinclair/typebox';
import { defineActor, defineProtocol } from '../src/runtime/actor.ts';

/** The benchmark's no-op actor: `ping` carries the time it was sent. */
export const benchProtocol = defineProtocol('bench', { ping: { t: Type.Number() } });

export const benchActor = (onPing: (sentAt: number) => void) => defineActor(benchProtocol, { handlers: { ping: (_ctx, msg) => onPing(msg.t) } });
