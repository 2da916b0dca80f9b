#!/usr/bin/env node
// Installed from its package, the agent is compiled JavaScript (dist/). In a checkout of Relaybox it is the
// TypeScript in src/, compiled on load by tsx, a development dependency that an installed package lacks.
import { existsSync } from 'node:fs';

const compiled = new URL('../dist/relaybox-relay.js', import.meta.url);
if (existsSync(compiled)) {
  await import(compiled.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli.ts');
}
