import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkedInImportGraph, freshImportGraph } from '../../scripts/import-graph.js';

test('the import graph in docs/architecture.md is the one dependency-cruiser draws from today’s src/', () => {
  const checkedIn = checkedInImportGraph();
  assert.ok(checkedIn, 'docs/architecture.md holds the import graph between its markers');
  assert.equal(checkedIn, freshImportGraph(), 'the graph is stale: run `npm run docs:graph` and commit the result');
});

test('a graph that differs from the code is told apart', () => {
  const doc = `x\n<!-- import-graph:start (npm run docs:graph) -->\n\n\`\`\`mermaid\nflowchart LR\n\`\`\`\n\n<!-- import-graph:end -->\n`;
  assert.notEqual(checkedInImportGraph(doc), freshImportGraph());
});
