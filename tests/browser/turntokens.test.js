// Per-turn token counts: each finished turn shows what its model calls read and wrote, as the
// service reports them, placed after the turn's last block; also for turns no tab watched
// (sent through the API while the page showed another conversation), and after a reload.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, WAIT_MS, apiGet, screenshot, startConversation, waitIdle, withUi } = require('./harness');

// "12.3k" → 12300: the figure as the page rounds it.
function tokens(shown) {
  const match = /^(\d+(?:\.\d)?)(k?)$/.exec(shown);
  assert.ok(match, shown);
  return Number(match[1]) * (match[2] ? 1000 : 1);
}

// How the page rounds a count (as `formatTokens`), to compare with the service's figures.
function rounded(n) {
  if (n >= 1e4) return Math.round(n / 1e3) * 1000;
  if (n >= 1e3) return Math.round(n / 100) * 100;
  return n;
}

// The figure of the turn whose user message says `text`, and where it is placed.
async function turnFigure(page, text) {
  const message = page.locator('#items .item.user-message', { hasText: text });
  const turnId = await message.getAttribute('data-turn');
  const line = page.locator(`#items .turn-tokens[data-turn="${turnId}"]`);
  await line.waitFor();
  const shown = await line.textContent();
  const match = /^(\S+) in · (\S+) out$/.exec(shown);
  assert.ok(match, shown);
  const placed = await line.evaluate((node) => {
    const next = node.nextElementSibling;
    const previous = node.previousElementSibling;
    return { next: next && next.dataset.turn, previous: previous && previous.dataset.turn };
  });
  return { turnId, input: tokens(match[1]), output: tokens(match[2]), title: await line.getAttribute('title'), placed };
}

// Follows a conversation's event stream as another client would: once it is open, `ended`
// resolves when the next turn ends.
async function followTurnEnd(server, id) {
  const response = await fetch(`${server.base}/api/conversations/${encodeURIComponent(id)}/events`, {
    signal: AbortSignal.timeout(WAIT_MS),
  });
  assert.equal(response.status, 200);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const ended = (async () => {
    let text = '';
    while (!/^event: turn\.ended$/m.test(text)) {
      const { value, done } = await reader.read();
      assert.ok(!done, `the stream ended before the turn did:\n${text}`);
      text += decoder.decode(value, { stream: true });
    }
    await reader.cancel();
  })();
  return { ended };
}

// The service's figures of a conversation's root turns, by turn id.
async function served(server, id) {
  const page = await apiGet(server, `/api/conversations/${encodeURIComponent(id)}/turns`);
  return new Map(page.turns.map((turn) => [turn.id, turn.usage]));
}

test('each finished turn shows the tokens its model calls read and wrote, after its last block, also for turns no tab watched', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page, server }) => {
    const id = await startConversation(page, 'a short question');
    await page.locator('#items .item.agent-message.status-completed').waitFor();
    await waitIdle(page);
    const first = await turnFigure(page, 'a short question');
    const usage = (await served(server(), id)).get(first.turnId);
    assert.equal(usage.model_calls, 1);
    assert.ok(usage.input_tokens > 0 && usage.output_tokens > 0, JSON.stringify(usage));
    assert.deepEqual([first.input, first.output], [rounded(usage.input_tokens), rounded(usage.output_tokens)]);
    assert.deepEqual(first.placed, { next: null, previous: first.turnId }, 'the figure closes its turn');
    assert.match(first.title, /^This turn's 1 model call read [\d,]+ tokens and wrote [\d,]+\. Each call reads the whole conversation again\.$/);

    // A long answer writes more; a tool call makes two model calls.
    const long = Array.from({ length: 60 }, (_, n) => `Line ${n + 1} of a long text the demo model repeats back.`).join('\n');
    await page.fill('#message', `/echo\n${long}`);
    await page.press('#message', 'Enter');
    await page.locator('#items .item.agent-message', { hasText: 'Line 60 of a long text' }).waitFor();
    await waitIdle(page);
    const second = await turnFigure(page, 'Line 1 of a long text');
    assert.ok(second.output > first.output + 500, `${second.output} > ${first.output} + 500`);
    await page.fill('#message', '/shell echo two calls');
    await page.press('#message', 'Enter');
    await page.locator('#items .item.tool-call.status-completed').waitFor();
    await waitIdle(page);
    const third = await turnFigure(page, '/shell echo two calls');
    assert.match(third.title, /^This turn's 2 model calls read /);
    const firstNow = await turnFigure(page, 'a short question');
    assert.equal(firstNow.placed.next, second.turnId, 'the first figure stays with the first turn');
    await screenshot(page, 'turn-tokens');

    // A turn sent through the API while the page shows another conversation.
    await startConversation(page, 'another conversation');
    await waitIdle(page);
    const follower = await followTurnEnd(server(), id);
    const sent = await fetch(`${server().base}/api/conversations/${encodeURIComponent(id)}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'sent by another client' }),
    });
    assert.equal(sent.status, 202);
    const started = (await sent.json()).message;
    await follower.ended;
    await page.goto(`${server().base}/#/c/${encodeURIComponent(id)}`);
    await waitIdle(page);
    const unwatched = await turnFigure(page, started.text);
    const figures = await served(server(), id);
    assert.equal(unwatched.input, rounded(figures.get(unwatched.turnId).input_tokens));

    await page.reload();
    await waitIdle(page);
    for (const turn of [first, second, third, unwatched]) {
      const again = await turnFigure(page, turn === first ? 'a short question' : turn === second ? 'Line 1 of a long text' : turn === third ? '/shell echo two calls' : started.text);
      assert.deepEqual([again.input, again.output], [turn.input, turn.output]);
    }
  }));

test('a turn whose provider read from its prompt cache says how much', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake }) => {
    fake.push({ text: 'Cached answer.' });
    await startConversation(page, 'ask the cache');
    await page.locator('#items .item.agent-message', { hasText: 'Cached answer.' }).waitFor();
    await waitIdle(page);
    const line = page.locator('#items .turn-tokens').first();
    assert.equal(await line.textContent(), '321 in (256 cached) · 12 out');
    assert.match(await line.getAttribute('title'), /; 256 of the tokens read came from the provider's prompt cache, which costs less\.$/);
  }));

test("a priced model shows each turn's cost, and the conversation's in the header", { timeout: TEST_TIMEOUT }, () =>
  withUi(
    {
      fake: {
        agents: `
[models.p]
provider = "fake"
name = "fake-model"
context_window = 100000
max_output_tokens = 1000
price = { input = 3.0, cached_input = 0.3, output = 15.0 }

[agents.default]
description = "test agent"
model = "p"
tools = ["shell"]
`,
      },
    },
    async ({ page, fake }) => {
      fake.push({ text: 'Priced.' }, { text: 'Priced again.' });
      await startConversation(page, 'what does it cost');
      await page.locator('#items .item.agent-message', { hasText: 'Priced.' }).waitFor();
      await waitIdle(page);
      // 65 fresh input tokens at 3.0, 256 cached at 0.3 and 12 out at 15.0 a million.
      const line = page.locator('#items .turn-tokens').first();
      assert.equal(await line.textContent(), '321 in (256 cached) · 12 out · cost 0.0005');
      await page.locator('#conversation-meta .conversation-cost', { hasText: 'cost 0.0005' }).waitFor();
      // A second turn adds to the conversation's total.
      await page.fill('#message', 'and now');
      await page.press('#message', 'Enter');
      await page.locator('#items .item.agent-message', { hasText: 'Priced again.' }).waitFor();
      await waitIdle(page);
      await page.locator('#conversation-meta .conversation-cost', { hasText: 'cost 0.0009' }).waitFor();
    },
  ));
