// An MCP server that asks while its tool call runs, with the asking server of tests/mcp (built on
// the official TypeScript SDK): a question (elicitation) is a form in the approval card, one
// labelled field per field asked, required ones marked, the first focused; Submit sends the
// values typed as the schema says, and the tool gets them; Decline declines; an answer the
// service refuses is said by the form, which keeps what was typed. A request to use the model
// (sampling) shows the messages it would send, and is allowed once or denied, never remembered.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { TEST_TIMEOUT, apiGet, checkAxe, conversationId, inEachView, screenshot, startConversation, waitIdle, withUi } = require('./harness');

const ASKER = path.resolve(__dirname, '../mcp/asking-server.mjs');
const SDK = path.resolve(__dirname, '../mcp/node_modules/@modelcontextprotocol/sdk');

function agents() {
  assert.ok(fs.existsSync(SDK), `${SDK} is missing: run \`npm ci --prefix tests/mcp\``);
  return `
[agents.default]
description = "test agent"
model = "m"
tools = ["shell"]
mcp = ["asker"]
mcp_sampling = "ask"
approval_timeout_s = 900

[agents.default.permissions]
mcp = "allow"

[mcp.asker]
command = "node"
args = [${JSON.stringify(ASKER)}]
sandbox = "off"
`;
}

const question = (page) => page.locator('#items .approval.asking.question');
const answers = (card) => card.locator('button[data-decision]').allTextContents();
const focusedId = (page) => page.evaluate(() => document.activeElement && document.activeElement.id);

// The text of the MCP tool card's result, once the call is done.
async function toolOutput(page) {
  const card = page.locator('#items .item.tool-call.tool-mcp.state-ran');
  await card.waitFor();
  return (await card.locator('pre.output').textContent()).trim();
}

test("an MCP server's question is a form: its answer reaches the tool, and a refused value keeps what was typed", { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: { agents: agents() }, allowConsole: [/status of 400 \(Bad Request\)/] }, async ({ page, fake, server }) => {
    fake.push({ tool: 'mcp__asker__ask', args: {} }, { text: 'Deployed.' });
    const id = await startConversation(page, 'deploy the service');
    const card = question(page);
    await card.waitFor();

    // Who asks and what, then one labelled field per field asked, in the schema's order.
    assert.equal(await card.getAttribute('role'), 'group');
    assert.equal(await card.getAttribute('aria-label'), 'Question from the MCP server asker: Where should the service be deployed?');
    assert.equal(await card.locator('.approval-title').textContent(), 'Question from the MCP server asker');
    assert.equal(await card.locator('.question-message').textContent(), 'Where should the service be deployed?');
    const environment = card.getByLabel('Environment');
    const replicas = card.getByLabel('Replicas');
    const confirm = card.getByLabel('Run the migrations too');
    assert.equal(await environment.evaluate((node) => node.tagName), 'SELECT');
    assert.deepEqual(await environment.locator('option').allTextContents(), ['Choose…', 'staging', 'production']);
    assert.equal(await environment.evaluate((node) => node.required), true);
    assert.match(await card.locator('label[for]').first().textContent(), /Environment \(required\)/);
    assert.equal(await replicas.getAttribute('type'), 'number');
    assert.equal(await replicas.getAttribute('min'), '1');
    assert.equal(await replicas.getAttribute('max'), '10');
    assert.equal(await replicas.evaluate((node) => node.required), false);
    const hint = await replicas.evaluate((node) => document.getElementById(node.getAttribute('aria-describedby')).textContent);
    assert.equal(hint, 'How many copies run. A whole number, from 1 to 10.');
    assert.equal(await confirm.getAttribute('type'), 'checkbox');
    assert.equal(await confirm.isChecked(), false);
    const order = await card.locator('.question-field').evaluateAll((fields) => fields.map((field) => field.querySelector('select, input').name));
    assert.deepEqual(order, ['environment', 'replicas', 'confirm']);
    // Submit or decline, nothing remembered; the expiry as for any approval.
    assert.deepEqual(await answers(card), ['Submit', 'Decline']);
    assert.equal(await card.locator('.approval-rule, .approval-message').count(), 0);
    const [pending] = (await apiGet(server(), '/api/approvals')).approvals;
    assert.equal(pending.tool, 'mcp_question');
    assert.ok(pending.expires_at, 'approval_timeout_s gives it an expiry');
    assert.match(await card.locator('.approval-expiry').textContent(), /^declined at .+ unless answered$/);
    // The first field has the focus; a screen reader hears the question; the list marks it.
    await page.waitForFunction(() => document.activeElement && document.activeElement.name === 'environment');
    await page.waitForFunction(() => document.getElementById('announcer').textContent.includes('Question from the MCP server asker: Where should the service be deployed?'));
    await page.locator(`#conversation-list li[data-id="${id}"] .row-badge.awaiting`).waitFor();
    await page.locator('#items .item.tool-call.tool-mcp').waitFor();
    await inEachView(page, async (size, scheme) => {
      await card.scrollIntoViewIfNeeded();
      await screenshot(page, `mcp-question-${size}-${scheme}`);
      await checkAxe(page, `an MCP question, ${size} ${scheme}`);
    });
    await page.setViewportSize({ width: 1400, height: 900 });

    // A required field left empty is said before anything is sent.
    await card.getByRole('button', { name: 'Submit' }).click();
    assert.equal(await card.locator('.approval-error').textContent(), 'Environment needs an answer.');
    assert.equal(await environment.getAttribute('aria-invalid'), 'true');
    assert.equal(await focusedId(page), await environment.getAttribute('id'));

    // A value the service refuses: its message by the form, the field marked and focused,
    // everything typed kept.
    await environment.selectOption({ label: 'production' });
    await replicas.fill('50');
    await confirm.check();
    await card.getByRole('button', { name: 'Submit' }).click();
    const error = card.locator('.approval-error');
    await error.filter({ hasText: /replicas.*at most 10/ }).waitFor();
    assert.equal(await error.getAttribute('role'), 'alert');
    assert.equal(await replicas.getAttribute('aria-invalid'), 'true');
    assert.equal(await environment.getAttribute('aria-invalid'), null);
    assert.equal(await focusedId(page), await replicas.getAttribute('id'));
    assert.equal(await environment.evaluate((node) => node.selectedOptions[0].textContent), 'production');
    assert.equal(await replicas.inputValue(), '50');
    assert.equal(await confirm.isChecked(), true);
    assert.equal(await card.getAttribute('data-status'), 'pending');
    await checkAxe(page, 'an MCP question with a refused value');
    await screenshot(page, 'mcp-question-refused');

    // Corrected and submitted with Enter: the tool gets the values, typed.
    await replicas.fill('3');
    await replicas.press('Enter');
    const settled = page.locator('#items .approval.settled.question[data-status="allowed"]');
    await settled.waitFor();
    assert.equal(
      await settled.locator('.approval-outcome').textContent(),
      'Submitted by you (this browser): Environment: production; Replicas: 3; Run the migrations too: yes · asker asked: “Where should the service be deployed?”',
    );
    const output = await toolOutput(page);
    const match = /^answer: accept (\{.*\})$/.exec(output);
    assert.ok(match, `the tool's result: ${output}`);
    assert.deepEqual(JSON.parse(match[1]), { environment: 'production', replicas: 3, confirm: true });
    await page.locator('#items .item.agent-message', { hasText: 'Deployed.' }).waitFor();
    await waitIdle(page);
    await checkAxe(page, 'an answered MCP question');
    assert.equal(conversationId(page), id);
  }));

test("Decline answers an MCP server's question with nothing, from the keyboard", { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: { agents: agents() } }, async ({ page, fake }) => {
    fake.push({ tool: 'mcp__asker__ask', args: {} }, { text: 'Not deployed.' });
    await startConversation(page, 'deploy, or not');
    const card = question(page);
    await card.waitFor();
    await page.waitForFunction(() => document.activeElement && document.activeElement.name === 'environment');
    // Through the form in reading order, to Decline.
    const stops = [];
    for (let i = 0; i < 4; i++) {
      await page.keyboard.press('Tab');
      stops.push(await page.evaluate(() => document.activeElement.name || document.activeElement.textContent.trim()));
    }
    assert.deepEqual(stops, ['replicas', 'confirm', 'Submit', 'Decline']);
    await page.keyboard.press('Enter');
    const settled = page.locator('#items .approval.settled.question[data-status="denied"]');
    await settled.waitFor();
    assert.equal(await settled.locator('.approval-outcome').textContent(), 'Declined by you (this browser) · asker asked: “Where should the service be deployed?”');
    assert.equal(await page.evaluate(() => document.activeElement.classList.contains('approval-outcome')), true);
    assert.equal(await toolOutput(page), 'answer: decline');
    await page.locator('#items .item.agent-message', { hasText: 'Not deployed.' }).waitFor();
    await waitIdle(page);
  }));

test("an MCP server's request to use the model shows what it would send, and is allowed once", { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: { agents: agents() } }, async ({ page, fake }) => {
    fake.push({ tool: 'mcp__asker__summarize', args: {} }, { text: 'The notes, in one line.' }, { text: 'Summarized.' });
    await startConversation(page, 'summarize the notes');
    const card = page.locator('#items .approval.asking');
    await card.waitFor();
    assert.equal(await card.locator('.approval-title').textContent(), 'Let the MCP server asker use the model?');
    const terms = await card.locator('.approval-details dt').allTextContents();
    assert.deepEqual(terms.slice(0, 4), ['Server', 'System prompt', 'Message', 'Answer of at most']);
    const values = card.locator('.approval-details dd');
    assert.equal(await values.nth(0).textContent(), 'asker');
    assert.equal(await values.nth(1).textContent(), 'You write one-line summaries.');
    assert.equal(await values.nth(2).locator('.sampling-role').textContent(), 'User');
    assert.equal(await values.nth(2).locator('pre').textContent(), 'Summarize: the release notes');
    assert.equal(await values.nth(3).textContent(), '200 tokens');
    // Allowed once or denied: no rule, no "remember" answer.
    assert.deepEqual(await answers(card), ['Allow once', 'Deny']);
    assert.equal(await card.locator('.approval-rule, .approval-message').count(), 0);
    await checkAxe(page, 'an MCP sampling request');
    await screenshot(page, 'mcp-sampling');

    await card.getByRole('button', { name: 'Allow once' }).click();
    const settled = page.locator('#items .approval.settled[data-status="allowed"]');
    await settled.waitFor();
    assert.equal(await settled.locator('.approval-outcome').textContent(), 'Allowed once by you (this browser) · use of the model by the MCP server asker');
    assert.match(await toolOutput(page), /^sampled by .+: The notes, in one line\.$/);
    await page.locator('#items .item.agent-message', { hasText: 'Summarized.' }).waitFor();
    await waitIdle(page);
  }));
