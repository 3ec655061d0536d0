// An MCP server's tool call reads as a tool card: the tool's own name, the server it came from,
// the arguments and the result, with a JSON result folded and an image shown. The server is the real
// server-everything that `npm ci --prefix tests/mcp` installs (scripts/test runs it first).
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { TEST_TIMEOUT, startConversation, waitIdle, withUi } = require('./harness');

const EVERYTHING = path.resolve(__dirname, '../mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js');

// `mcp`: the agent's setting for MCP tools.
function agents(mcp = 'allow') {
  assert.ok(fs.existsSync(EVERYTHING), `${EVERYTHING} is missing: run \`npm ci --prefix tests/mcp\``);
  return `
[agents.default]
description = "test agent"
model = "m"
tools = ["shell"]
mcp = ["everything"]

[agents.default.permissions]
mcp = "${mcp}"

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
      { tool: 'mcp__everything__get-tiny-image', args: {} },
      { text: 'Both answered.' },
    );
    await startConversation(page, 'use the MCP tools');
    await page.locator('#items .item.agent-message', { hasText: 'Both answered.' }).waitFor();
    await waitIdle(page);

    const cards = page.locator('#items .item.tool-call.tool-mcp');
    assert.equal(await cards.count(), 3);
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

    // An image result shows as the image itself, below the result's text.
    const image = cards.nth(2).locator('.images img');
    assert.equal(await image.count(), 1);
    assert.match(await image.getAttribute('src'), /^data:image\/png;base64,/);
    assert.equal(await image.getAttribute('alt'), 'image returned by get-tiny-image (MCP everything)');
    await image.evaluate((img) => img.decode());
    assert.ok(await image.evaluate((img) => img.naturalWidth > 0), 'the image did not decode');
  }));

test('an MCP call that asks first shows in the Agents tab with its server and arguments', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: { agents: agents('ask') } }, async ({ page, fake }) => {
    fake.push({ tool: 'mcp__everything__echo', args: { message: 'may I?' } }, { text: 'Echoed.' });
    await startConversation(page, 'echo after asking');
    await page.locator('#items .approval.asking').waitFor();
    await page.click('#tab-agents');
    const row = page.locator('#agent-list li.agent-row').first();
    await row.locator('.badge.session-approval', { hasText: 'waits for your approval' }).waitFor();
    const asking = row.locator('.agent-approval');
    assert.equal(await asking.locator('span').first().textContent(), 'Asks to run (echo (MCP everything)): ');
    assert.equal(await asking.locator('code').textContent(), JSON.stringify({ message: 'may I?' }));
    await asking.locator('button', { hasText: 'Answer' }).click();
    await page.locator('#tab-conversation[aria-selected="true"]').waitFor();
    await page.locator('#items .approval.asking button', { hasText: 'Allow once' }).click();
    await page.locator('#items .item.agent-message', { hasText: 'Echoed.' }).waitFor();
    await waitIdle(page);
    const card = page.locator('#items .item.tool-call.tool-mcp');
    assert.equal(await card.locator('pre.output').textContent(), 'Echo: may I?');
  }));
