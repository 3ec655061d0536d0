// An MCP server's tool call reads as a tool card: the tool's own name, the server it came from,
// the arguments and the result, with a JSON result folded. The server is the real
// server-everything that `npm ci --prefix tests/mcp` installs (scripts/test runs it first).
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { TEST_TIMEOUT, startConversation, waitIdle, withUi } = require('./harness');

const EVERYTHING = path.resolve(__dirname, '../mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js');

function agents() {
  assert.ok(fs.existsSync(EVERYTHING), `${EVERYTHING} is missing: run \`npm ci --prefix tests/mcp\``);
  return `
[agents.default]
description = "test agent"
model = "m"
tools = ["shell"]
mcp = ["everything"]

[agents.default.permissions]
mcp = "allow"

[mcp.everything]
command = "node"
args = [${JSON.stringify(EVERYTHING)}, "stdio"]
`;
}

test('an MCP call shows its tool, its server, its arguments and its result, JSON folded', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: { agents: agents() } }, async ({ page, fake }) => {
    fake.push(
      { tool: 'mcp__everything__echo', args: { message: 'hello from MCP' } },
      { tool: 'mcp__everything__get-structured-content', args: { location: 'Chicago' } },
      { text: 'Both answered.' },
    );
    await startConversation(page, 'use the MCP tools');
    await page.locator('#items .item.agent-message', { hasText: 'Both answered.' }).waitFor();
    await waitIdle(page);

    const cards = page.locator('#items .item.tool-call.tool-mcp');
    assert.equal(await cards.count(), 2);
    const echo = cards.nth(0);
    assert.equal(await echo.locator('.tool-name').textContent(), 'echo');
    assert.equal(await echo.locator('.tool-subject').textContent(), 'MCP server everything');
    assert.deepEqual(await echo.locator('.tool-args dt').allTextContents(), ['message']);
    assert.deepEqual(await echo.locator('.tool-args dd').allTextContents(), ['hello from MCP']);
    assert.equal(await echo.locator('pre.output').textContent(), 'Echo: hello from MCP');
    assert.equal(await echo.locator('.tool-state').textContent(), 'done');

    const weather = cards.nth(1);
    assert.equal(await weather.locator('.tool-name').textContent(), 'get-structured-content');
    const folded = weather.locator('details.tool-json');
    assert.equal(await folded.locator('summary').textContent(), 'JSON result · 5 lines');
    assert.equal(await folded.evaluate((details) => details.open), false);
    await folded.locator('summary').click();
    assert.equal(
      await folded.locator('pre').textContent(),
      JSON.stringify({ temperature: 36, conditions: 'Light rain / drizzle', humidity: 82 }, null, 2),
    );
  }));
