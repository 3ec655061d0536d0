// Approvals in the web UI, with the demo model and an agent whose shell calls ask first: a card
// at the tool call says what would run, where and why, and is answered with the keyboard; every
// page sees it close when one answers; a second answer shows the first one's outcome (409); a
// denial tells the agent why, an interrupt cancels; a rule that does not match the call is
// refused next to the buttons; "Always allow" keeps a rule the rules view lists and deletes; an
// escalation offers only Allow once and Deny; the sidebar marks a conversation that waits, and
// the Agents tab the agent (a sub-agent's card also waits under the main timeline). A command of
// several parts keeps a rule for each, a broader one offered with what else it allows; invisible
// and control characters are marked; why it asks is said in words, its setting on focus; an
// outcome says "you (this browser)" or the kind of client; Alt+A and Alt+D answer from the
// message box; the waiting cards dock above the message box.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { ASKS_FIRST, DESKTOP, PHONE, TEST_TIMEOUT, WAIT_MS, checkAxe, inEachView, screenshot, startConversation, waitIdle, withUi } = require('./harness');

const ALL_ANSWERS = ['Allow once', 'Allow in this conversation', 'Always allow', 'Deny'];

const focused = (page) =>
  page.evaluate(() => {
    const node = document.activeElement;
    if (!node) return null;
    return node.tagName === 'INPUT' ? node.className : node.textContent.trim() || node.id;
  });

// The card of the conversation's pending approval (one at a time in these tests).
const pendingCard = (page) => page.locator('#items .approval.asking');

// The card's answers (not its other buttons, such as the dock's toggle).
async function buttons(card) {
  return card.locator('button[data-decision]').allTextContents();
}

// A second page on the same conversation; its errors fail the test like the first page's
// (`allowed`: the console errors expected).
async function secondPage(context, base, id, errors, prepare, allowed = []) {
  const other = await context.newPage();
  other.setDefaultTimeout(WAIT_MS);
  other.on('pageerror', (error) => errors.push(`second page error: ${error.message}`));
  other.on('console', (message) => {
    if (message.type() === 'error' && !allowed.some((pattern) => pattern.test(message.text()))) {
      errors.push(`second page console error: ${message.text()}`);
    }
  });
  if (prepare) await prepare(other);
  await other.goto(`${base}/#/c/${encodeURIComponent(id)}`);
  return other;
}

// Lets the test hold back the approval events a page's streams deliver (window.__holdApprovals),
// so that page can answer after another page did without having heard of it: a test's view of
// a slow network, set up before the page's own scripts run.
function holdableApprovalEvents(page) {
  return page.addInitScript(() => {
    const Native = window.EventSource;
    window.__holdApprovals = false;
    window.EventSource = class extends Native {
      addEventListener(type, listener, options) {
        const held = (event) => {
          if (window.__holdApprovals && type.startsWith('approval.')) return;
          listener.call(this, event);
        };
        return super.addEventListener(type, held, options);
      }
    };
  });
}

// What a colour variable of the stylesheet computes to, as getComputedStyle gives colours.
function cssColor(page, variable) {
  return page.evaluate((name) => {
    const probe = document.createElement('span');
    probe.style.color = `var(${name})`;
    document.body.append(probe);
    const color = getComputedStyle(probe).color;
    probe.remove();
    return color;
  }, variable);
}

async function post(server, apiPath, body) {
  const response = await fetch(`${server.base}${apiPath}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'user-agent': 'approvals-test-client' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

test('a card asks before the command runs; Allow once with the keyboard runs it, and a second page sees the card close', { timeout: TEST_TIMEOUT }, () =>
  withUi({ config: ASKS_FIRST }, async ({ page, server, context }) => {
    const errors = [];
    const id = await startConversation(page, '/shell touch ran.txt');
    const card = pendingCard(page);
    await card.waitFor();

    // It sits right after its tool call, which waits.
    assert.equal(await page.locator('#items .item.tool-call.tool-shell + .approval.asking').count(), 1);
    await page.locator('#items .item.tool-call .tool-state.state-waiting', { hasText: 'waiting for approval' }).waitFor();
    // What would run, where, and why it asks.
    assert.equal(await card.getAttribute('role'), 'group');
    assert.equal(await card.getAttribute('aria-label'), 'Approval needed: Shell $ touch ran.txt');
    assert.equal(await card.locator('.approval-subject').textContent(), 'touch ran.txt');
    assert.equal(await card.locator('.approval-cwd').textContent(), server().cwd);
    assert.equal(await card.locator('.approval-reason').textContent(), 'this agent asks before every shell command');
    assert.deepEqual(await buttons(card), ALL_ANSWERS);
    // The rule kept by default is the command's exact text.
    assert.equal(await card.locator('input.approval-rule').inputValue(), 'touch ran.txt');
    assert.equal(await card.getByLabel('Rule', { exact: true }).count(), 1);
    assert.equal(await card.getByLabel('Message', { exact: true }).count(), 1);
    assert.equal(fs.existsSync(path.join(server().cwd, 'ran.txt')), false, 'nothing runs before the answer');
    // A screen reader hears of it; the sidebar marks the conversation.
    await page.waitForFunction(() => document.getElementById('announcer').textContent.includes('asks for your approval: Shell $ touch ran.txt'));
    const mark = page.locator(`#conversation-list li[data-id="${id}"] .row-badge.awaiting`);
    await mark.waitFor();
    assert.equal(await mark.textContent(), 'approval needed');
    await checkAxe(page, 'an approval card');
    await screenshot(page, 'approval-card');

    const other = await secondPage(context, server().base, id, errors);
    const otherCard = pendingCard(other);
    await otherCard.waitFor();
    await other.locator(`#conversation-list li[data-id="${id}"] .row-badge.awaiting`).waitFor();

    // The keyboard: from the message box backwards through the card, in reading order, each stop
    // with a visible focus.
    assert.equal(await page.evaluate(() => document.activeElement.id), 'message');
    const stops = [];
    for (let i = 0; i < 6; i++) {
      await page.keyboard.press('Shift+Tab');
      stops.push(await focused(page));
      assert.ok(
        await page.evaluate(() => document.activeElement.matches(':focus-visible') && getComputedStyle(document.activeElement).outlineStyle !== 'none'),
        `a visible focus on ${stops[i]}`,
      );
    }
    assert.deepEqual(stops, ['Deny', 'approval-message', 'Always allow', 'Allow in this conversation', 'approval-rule', 'Allow once']);
    await page.keyboard.press('Enter');

    // Closed to one line on both pages; the focus stays on the card's line.
    const settled = page.locator('#items .approval.settled[data-status="allowed"]');
    await settled.waitFor();
    assert.equal(await settled.locator('.approval-outcome').textContent(), 'Allowed once by you (this browser) · $ touch ran.txt');
    assert.equal(await page.evaluate(() => document.activeElement.classList.contains('approval-outcome')), true);
    // Another tab of this browser knows it was this browser's answer.
    await other.locator('#items .approval.settled .approval-outcome', { hasText: 'Allowed once by you (this browser)' }).waitFor();
    assert.equal(await otherCard.count(), 0);

    // The command ran, and the marks are gone.
    await page.locator('#items .item.tool-call .tool-state.state-ran', { hasText: 'ran · exit 0' }).waitFor();
    assert.equal(fs.existsSync(path.join(server().cwd, 'ran.txt')), true);
    await mark.waitFor({ state: 'detached' });
    await other.locator('#conversation-list .row-badge.awaiting').waitFor({ state: 'detached' });
    await waitIdle(page);
    await other.close();
    assert.deepEqual(errors, []);
  }));

test('an answer that comes second shows the outcome of the first (409)', { timeout: TEST_TIMEOUT }, () =>
  withUi({ config: ASKS_FIRST }, async ({ page, server, context }) => {
    const errors = [];
    const id = await startConversation(page, '/shell touch first.txt');
    await pendingCard(page).waitFor();
    // Chrome logs the refused answer.
    const late = await secondPage(context, server().base, id, errors, holdableApprovalEvents, [/status of 409 \(Conflict\)/]);
    await pendingCard(late).waitFor();
    // The late page hears nothing of the first answer, so it still offers its own.
    await late.evaluate(() => (window.__holdApprovals = true));
    await pendingCard(page).locator('button', { hasText: 'Allow once' }).click();
    await page.locator('#items .approval.settled[data-status="allowed"]').waitFor();
    assert.equal(await pendingCard(late).count(), 1);
    await pendingCard(late).locator('button', { hasText: 'Deny' }).click();
    const outcome = late.locator('#items .approval.settled[data-status="allowed"] .approval-outcome');
    await outcome.waitFor();
    // The first answer was this browser's (the other tab's): the refused one does not undo that.
    assert.equal(await outcome.textContent(), 'Allowed once by you (this browser) · $ touch first.txt');
    // Its own mark is cleared by that answer too (the list's event was held as well).
    await late.locator('#conversation-list .row-badge.awaiting').waitFor({ state: 'detached' });
    await page.locator('#items .item.tool-call .tool-state.state-ran').waitFor();
    assert.equal(fs.existsSync(path.join(server().cwd, 'first.txt')), true);
    await late.close();
    assert.deepEqual(errors, []);
  }));

test('Deny with a message: the call never runs and the agent is told why; an interrupt cancels', { timeout: TEST_TIMEOUT }, () =>
  withUi({ config: ASKS_FIRST }, async ({ page, server }) => {
    await startConversation(page, '/shell touch denied.txt');
    const card = pendingCard(page);
    await card.waitFor();
    await card.getByLabel('Message', { exact: true }).focus();
    await page.keyboard.type('use the make target instead');
    // Tab to Deny, and Space presses it.
    await page.keyboard.press('Tab');
    assert.equal(await focused(page), 'Deny');
    await page.keyboard.press('Space');

    const outcome = page.locator('#items .approval.settled[data-status="denied"] .approval-outcome');
    await outcome.waitFor();
    assert.equal(await outcome.textContent(), 'Denied by you (this browser): “use the make target instead” · $ touch denied.txt');
    // The call reads denied, in a neutral style: a decision, not a failure.
    const tool = page.locator('#items .item.tool-call.tool-shell');
    const badge = tool.locator('.tool-state.state-denied');
    await badge.waitFor();
    assert.equal(await badge.textContent(), 'denied');
    assert.equal(await tool.locator('.tool-state.state-failed').count(), 0);
    assert.equal(await tool.evaluate((node) => node.classList.contains('state-denied')), true);
    assert.equal(await badge.evaluate((node) => getComputedStyle(node).color), await cssColor(page, '--muted'));
    assert.notEqual(await tool.evaluate((node) => getComputedStyle(node).borderLeftColor), await cssColor(page, '--danger'), 'no red edge');
    assert.equal(await tool.locator('pre.output').textContent(), 'Not run: the user denied this call: use the make target instead');
    await waitIdle(page);
    assert.equal(fs.existsSync(path.join(server().cwd, 'denied.txt')), false);

    // An interrupt (Esc in the message box) cancels the next one: its card says so.
    await page.fill('#message', '/shell touch never.txt');
    await page.press('#message', 'Enter');
    await pendingCard(page).waitFor();
    await page.keyboard.press('Escape');
    const cancelled = page.locator('#items .approval.settled[data-status="cancelled"] .approval-outcome');
    await cancelled.waitFor();
    assert.equal(await cancelled.textContent(), 'Cancelled: the turn ended before an answer · $ touch never.txt');
    await waitIdle(page);
    assert.equal(fs.existsSync(path.join(server().cwd, 'never.txt')), false);
  }));

test('a rule that does not match is refused next to the buttons; Always allow keeps a rule the rules view lists and deletes', { timeout: TEST_TIMEOUT }, () =>
  // Chrome logs the refused answer.
  withUi({ config: ASKS_FIRST, allowConsole: [/status of 400 \(Bad Request\)/] }, async ({ page, server }) => {
    const id = await startConversation(page, '/shell touch kept.txt');
    const card = pendingCard(page);
    await card.waitFor();
    const rule = card.getByLabel('Rule', { exact: true });
    await rule.fill('rm *');
    await card.locator('button', { hasText: 'Always allow' }).click();
    const error = card.locator('.approval-error');
    await error.filter({ hasText: 'does not match this call' }).waitFor();
    assert.equal(await error.getAttribute('role'), 'alert');
    assert.equal(await card.getAttribute('data-status'), 'pending');

    await rule.fill('touch kept*');
    await card.locator('button', { hasText: 'Always allow' }).click();
    const outcome = page.locator('#items .approval.settled[data-status="allowed"] .approval-outcome');
    await outcome.waitFor();
    assert.equal(await outcome.textContent(), 'Always allowed by you (this browser) (rule “touch kept*”) · $ touch kept.txt');
    await page.locator('#items .item.tool-call .tool-state.state-ran').waitFor();
    await waitIdle(page);

    // The rules view, from the sidebar.
    await page.click('#rules-link');
    await page.waitForURL(/#\/rules$/);
    await page.locator('#rules-view[data-state="loaded"]').waitFor();
    assert.equal(await page.getAttribute('#main', 'data-view'), 'rules');
    assert.equal(await page.textContent('#conversation-title'), 'Remembered rules');
    assert.equal(await page.getAttribute('#rules-link', 'aria-current'), 'page');
    const rows = page.locator('#rules-body tr');
    assert.equal(await rows.count(), 1);
    const row = rows.first();
    assert.equal(await row.locator('.rule-tool').textContent(), 'Shell');
    assert.equal(await row.locator('.rule-pattern').textContent(), 'touch kept*');
    assert.equal(await row.locator('.rule-scope').textContent(), `Agent “default” in ${server().cwd}, every conversation`);
    assert.equal(await row.locator('.rule-by').textContent(), 'the web UI');
    assert.equal(await row.locator('.rule-when').textContent(), 'just now');
    await checkAxe(page, 'the rules view');
    await screenshot(page, 'rules-view');

    // Deleted with the keyboard: gone here and on the service.
    await row.locator('button', { hasText: 'Delete' }).focus();
    assert.equal(await focused(page), 'Delete');
    await page.keyboard.press('Enter');
    await rows.first().waitFor({ state: 'detached' });
    assert.match(await page.textContent('#rules-status'), /^No rules are kept/);
    assert.equal(await page.locator('#rules-table').isVisible(), false);
    const left = await (await fetch(`${server().base}/api/rules`)).json();
    assert.deepEqual(left.rules, []);

    // Back to the conversation, from the list.
    await page.locator(`#conversation-list li[data-id="${id}"] a.conv-link`).click();
    await waitIdle(page);
    assert.equal(await page.locator('#rules-view').isVisible(), false);
    assert.equal(await page.getAttribute('#rules-link', 'aria-current'), null);
  }));

test('an escalation card offers only Allow once and Deny, and says why it wants out of the sandbox', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page, root }) => {
    const outside = path.join(root, 'outside.txt');
    await startConversation(page, `/escalate needs to write the shared report: echo hi > ${outside}`);
    const card = pendingCard(page);
    await card.waitFor();
    assert.equal(await card.evaluate((node) => node.classList.contains('escalation')), true);
    assert.deepEqual(await buttons(card), ['Allow once', 'Deny']);
    assert.equal(await card.locator('input.approval-rule').count(), 0);
    assert.match(await card.locator('.approval-title').textContent(), /outside the sandbox/);
    assert.equal(await card.locator('.approval-escalate').textContent(), 'needs to write the shared report');
    await checkAxe(page, 'an escalation card');
    await card.locator('button', { hasText: 'Allow once' }).click();
    await page.locator('#items .approval.settled[data-status="allowed"]').waitFor();
    await page.locator('#items .item.tool-call .tool-state.state-ran').waitFor();
    await waitIdle(page);
    assert.equal(fs.readFileSync(outside, 'utf8'), 'hi\n');
  }));

test('the sidebar marks conversations that wait, at start and live; the Agents tab shows the agent and leads to its card', { timeout: TEST_TIMEOUT }, () =>
  withUi({ config: ASKS_FIRST }, async ({ page, server }) => {
    // Asked by another client: the list stream brings the mark.
    const first = await post(server(), '/api/conversations', { text: '/shell touch early.txt' });
    assert.equal(first.status, 201);
    const firstId = first.body.conversation.id;
    const firstMark = page.locator(`#conversation-list li[data-id="${firstId}"] .row-badge.awaiting`);
    await firstMark.waitFor();
    // A page loaded while it waits finds it with GET /api/approvals (the list stream's snapshot
    // has no approvals, and the conversation is not opened).
    await page.reload();
    await firstMark.waitFor();
    assert.equal(await firstMark.textContent(), 'approval needed');
    assert.equal(await page.locator(`#conversation-list li[data-id="${firstId}"]`).evaluate((li) => li.classList.contains('awaiting-approval')), true);
    assert.match(await page.locator(`#conversation-list li[data-id="${firstId}"] a.conv-link`).textContent(), /approval needed/);

    // Another one, answered by another client: its mark clears.
    const second = await post(server(), '/api/conversations', { text: '/shell touch late.txt' });
    const secondId = second.body.conversation.id;
    const secondMark = page.locator(`#conversation-list li[data-id="${secondId}"] .row-badge.awaiting`);
    await secondMark.waitFor();
    const approvals = (await (await fetch(`${server().base}/api/approvals`)).json()).approvals;
    const secondApproval = approvals.find((a) => a.conversation_id === secondId);
    const denied = await post(server(), `/api/approvals/${secondApproval.id}`, { decision: 'deny' });
    assert.equal(denied.status, 200);
    await secondMark.waitFor({ state: 'detached' });
    assert.equal(await firstMark.count(), 1);

    // The Agents tab of the first: the main agent waits, for this command.
    await page.locator(`#conversation-list li[data-id="${firstId}"] a.conv-link`).click();
    await pendingCard(page).waitFor();
    await page.click('#tab-agents');
    const root = page.locator('#agent-list li.agent-row').first();
    await root.locator('.badge.session-approval', { hasText: 'waits for your approval' }).waitFor();
    assert.equal(await root.locator('.agent-approval code').textContent(), '$ touch early.txt');
    await root.locator('.agent-approval button', { hasText: 'Answer' }).click();
    // Its card, with the focus on its first answer.
    await page.locator('#tab-conversation[aria-selected="true"]').waitFor();
    assert.equal(await focused(page), 'Allow once');
    await page.keyboard.press('Enter');
    await page.locator('#items .approval.settled[data-status="allowed"]').waitFor();
    await firstMark.waitFor({ state: 'detached' });
    await page.click('#tab-agents');
    await root.locator('.badge.session-approval').waitFor({ state: 'detached' });
  }));

test("a sub-agent's approval waits under the main timeline; the Agents tab names the agent and leads to its card", { timeout: TEST_TIMEOUT }, () =>
  withUi(
    {
      config: `
[agents.default]
description = "the main agent"
model = "demo"
spawnable = ["helper"]
[agents.helper]
description = "a sub-agent whose shell calls ask first"
model = "demo"
[agents.helper.permissions]
shell = "ask"
`,
    },
    async ({ page, server }) => {
      await startConversation(page, '/spawn helper: /shell touch sub.txt');
      // Seen from the main agent's timeline, answerable there, saying who asks.
      const elsewhere = page.locator('#approvals-elsewhere .approval.asking');
      await elsewhere.waitFor();
      assert.equal(await elsewhere.locator('.approval-asker').textContent(), 'asked by sub-agent helper #1 · /shell touch sub.txt');
      assert.deepEqual(await buttons(elsewhere), ALL_ANSWERS);

      await page.click('#tab-agents');
      const rows = page.locator('#agent-list li.agent-row');
      const helper = page.locator('#agent-list li.agent-row[data-depth="1"]');
      await helper.locator('.badge.session-approval', { hasText: 'waits for your approval' }).waitFor();
      assert.equal(await rows.first().locator('.badge.session-approval').count(), 0, 'the main agent does not wait');
      assert.equal(await helper.locator('.agent-approval code').textContent(), '$ touch sub.txt');
      await helper.locator('.agent-approval button', { hasText: 'Answer' }).click();

      // The sub-agent's history, its card at its call, the focus on its first answer.
      await page.locator('#session-crumb', { hasText: 'Viewing sub-agent helper #1 · /shell touch sub.txt' }).waitFor();
      await page.locator('#items .item.tool-call + .approval.asking button:focus', { hasText: 'Allow once' }).waitFor();
      assert.equal(await page.locator('#approvals-elsewhere .approval').count(), 0);
      await page.keyboard.press('Enter');
      await page.locator('#items .approval.settled[data-status="allowed"]').waitFor();
      await page.locator('#items .item.tool-call .tool-state.state-ran').waitFor();
      assert.equal(fs.existsSync(path.join(server().cwd, 'sub.txt')), true);
    },
  ));

// Keeps every text the page announces (a later one replaces it in the live region), and waits
// for one.
async function recordAnnouncements(page) {
  await page.evaluate(() => {
    window.__announced = [];
    new MutationObserver(() => {
      const text = document.getElementById('announcer').textContent;
      if (text) window.__announced.push(text);
    }).observe(document.getElementById('announcer'), { childList: true, characterData: true, subtree: true });
  });
  return (text) => page.waitForFunction((expected) => window.__announced.includes(expected), text);
}

// The POST bodies this page sends to answer approvals, in order.
function answersSent(page) {
  const bodies = [];
  page.on('request', (request) => {
    if (request.method() === 'POST' && /\/api\/approvals\/[^/]+$/.test(new URL(request.url()).pathname)) bodies.push(request.postDataJSON());
  });
  return bodies;
}

test('a command of several parts keeps a rule for each; a broader choice says what else it allows; a refused rule is shown and the card stays', { timeout: TEST_TIMEOUT }, () =>
  // Chrome logs the refused answer.
  withUi({ config: ASKS_FIRST, allowConsole: [/status of 400 \(Bad Request\)/] }, async ({ page, server }) => {
    const sent = answersSent(page);
    const id = await startConversation(page, '/shell echo hello world && touch made.txt');
    const card = pendingCard(page);
    await card.waitFor();
    // One field per part, each its exact text.
    const first = card.getByLabel('Rule 1', { exact: true });
    const second = card.getByLabel('Rule 2', { exact: true });
    assert.equal(await first.inputValue(), 'echo hello world');
    assert.equal(await second.inputValue(), 'touch made.txt');
    assert.match(await card.locator('.approval-hint').textContent(), /^One rule for each part of the command/);
    // The first part offers a broader rule, "only this" chosen; the second none.
    const scope = card.getByRole('radiogroup', { name: 'What rule 1 allows' });
    assert.equal(await scope.getByRole('radio', { name: 'only this' }).isChecked(), true);
    const broader = scope.getByRole('radio', { name: 'echo hello*' });
    assert.equal(await broader.isChecked(), false);
    assert.equal(await card.locator('.approval-also').textContent(), 'also allows: echo hello --force, echo hello ../elsewhere, echo hello-more, …');
    assert.equal(await broader.evaluate((radio) => document.getElementById(radio.getAttribute('aria-describedby')).textContent.startsWith('also allows')), true);
    assert.equal(await card.getByRole('radiogroup').count(), 1);
    await checkAxe(page, 'a card with several rules');
    await screenshot(page, 'approval-rules');

    // Choosing the broader rule puts it in the field; Esc after an edit puts it back.
    await broader.check();
    assert.equal(await first.inputValue(), 'echo hello*');
    await first.fill('echo hello w*');
    await first.press('Escape');
    assert.equal(await first.inputValue(), 'echo hello*');

    // A rule the service refuses: its reason in the card's error line; the card still answers.
    await second.fill('*');
    await card.locator('button', { hasText: 'Allow in this conversation' }).click();
    const error = card.locator('.approval-error');
    await error.filter({ hasText: 'the rule "*" would allow every command: name the program' }).waitFor();
    assert.equal(await card.getAttribute('data-status'), 'pending');
    assert.deepEqual(sent[0].rules, ['echo hello*', '*']);
    await second.press('Escape');
    assert.equal(await second.inputValue(), 'touch made.txt');

    await card.locator('button', { hasText: 'Allow in this conversation' }).click();
    const outcome = page.locator('#items .approval.settled[data-status="allowed"] .approval-outcome');
    await outcome.waitFor();
    assert.deepEqual(sent[1], { decision: 'allow_conversation', rules: ['echo hello*', 'touch made.txt'] });
    assert.equal(
      await outcome.textContent(),
      'Allowed in this conversation by you (this browser) (rules “echo hello*”, “touch made.txt”) · $ echo hello world && touch made.txt',
    );
    await page.locator('#items .item.tool-call .tool-state.state-ran').waitFor();
    await waitIdle(page);
    assert.equal(fs.existsSync(path.join(server().cwd, 'made.txt')), true);
    const rules = (await (await fetch(`${server().base}/api/rules`)).json()).rules;
    assert.deepEqual(
      rules.map((rule) => [rule.pattern, rule.scope.kind, rule.scope.conversation_id, rule.created_by]),
      [
        ['echo hello*', 'conversation', id, 'web'],
        ['touch made.txt', 'conversation', id, 'web'],
      ],
    );

    // The broader rule answers the next such command: it runs without asking.
    await page.fill('#message', '/shell echo hello again');
    await page.press('#message', 'Enter');
    await page.locator('#items .item.tool-call .tool-subject', { hasText: '$ echo hello again' }).waitFor();
    await page.locator('#items .item.tool-call.state-ran .tool-subject', { hasText: '$ echo hello again' }).waitFor();
    await waitIdle(page);
    assert.equal(await page.locator('.approval.asking').count(), 0);
  }));

test('invisible and control characters are marked and counted wherever the command shows, also once settled', { timeout: TEST_TIMEOUT }, () =>
  withUi({ config: ASKS_FIRST }, async ({ page }) => {
    const announced = await recordAnnouncements(page);
    await startConversation(page, "/shell printf 'a\u200Bb\x1b[0m' > odd.txt");
    const card = pendingCard(page);
    await card.waitFor();
    const marks = card.locator('.approval-subject .invisible-char');
    assert.deepEqual(await marks.allTextContents(), ['<U+200B>', '\\x1b']);
    assert.match(await marks.first().getAttribute('title'), /^An invisible character/);
    assert.match(await marks.last().getAttribute('title'), /^A control character/);
    assert.equal(await card.locator('.approval-subject').textContent(), "printf 'a<U+200B>b\\x1b[0m' > odd.txt");
    // They stand out: not the command's own colour.
    const colours = await marks.first().evaluate((mark) => [getComputedStyle(mark).color, getComputedStyle(mark.parentElement).color]);
    assert.notEqual(colours[0], colours[1]);
    // A warning says how many, and the card's description is that warning.
    const warning = card.locator('.approval-warning');
    assert.equal(await warning.textContent(), '⚠ This command contains 2 invisible or control characters, marked.');
    assert.equal(await card.getAttribute('aria-describedby'), await warning.getAttribute('id'));
    assert.equal(await card.getAttribute('aria-label'), "Approval needed: Shell $ printf 'a<U+200B>b\\x1b[0m' > odd.txt");
    await announced(
      "The agent asks for your approval: Shell $ printf 'a<U+200B>b\\x1b[0m' > odd.txt. This command contains 2 invisible or control characters, marked. " +
        'The card with the answers is in the conversation.',
    );
    // The tool call's own card, and the rule kept (a field cannot mark them: the line under it does).
    assert.deepEqual(await page.locator('#items .item.tool-call .tool-subject .invisible-char').allTextContents(), ['<U+200B>', '\\x1b']);
    assert.equal(await card.locator('.approval-rule-marked').textContent(), 'As written: printf a<U+200B>b\\x1b[0m');
    // Legible everywhere: both sizes, light and dark.
    await inEachView(page, async (size, scheme) => {
      await card.scrollIntoViewIfNeeded();
      await checkAxe(page, `a card with invisible characters, ${size} ${scheme}`);
      await screenshot(page, `approval-invisible-${size}-${scheme}`);
    });
    await page.setViewportSize(DESKTOP);
    await page.emulateMedia({ colorScheme: 'light' });

    // Denied with a message that hides one too: the outcome line marks both.
    await card.getByLabel('Message', { exact: true }).fill('no\u202Ethanks');
    await card.locator('button', { hasText: 'Deny' }).click();
    const settled = page.locator('#items .approval.settled[data-status="denied"]');
    await settled.waitFor();
    assert.equal(await settled.locator('.approval-outcome').textContent(), "Denied by you (this browser): “no<U+202E>thanks” · $ printf 'a<U+200B>b\\x1b[0m' > odd.txt");
    assert.deepEqual(await settled.locator('.invisible-char').allTextContents(), ['<U+202E>', '<U+200B>', '\\x1b']);
    assert.equal(
      await settled.getAttribute('aria-label'),
      "Approval: Denied by you (this browser): “no<U+202E>thanks”: Shell $ printf 'a<U+200B>b\\x1b[0m' > odd.txt",
    );
    await waitIdle(page);
  }));

test('Why it asks: the reason in plain words, the setting that decides it in a tooltip and on focus', { timeout: TEST_TIMEOUT }, () =>
  withUi({ config: ASKS_FIRST }, async ({ page }) => {
    await startConversation(page, '/shell touch why.txt');
    const card = pendingCard(page);
    await card.waitFor();
    const reason = card.locator('.approval-reason');
    assert.equal(await reason.textContent(), 'this agent asks before every shell command');
    assert.equal(await reason.getAttribute('title'), 'Decided by the setting agents.default.permissions.shell');
    // A screen reader hears the setting as the reason's description; the eye sees it on focus.
    const setting = card.locator(`#${await reason.getAttribute('aria-describedby')}`);
    assert.equal(await setting.textContent(), ' · decided by the setting agents.default.permissions.shell');
    const shown = () => setting.evaluate((node) => node.getBoundingClientRect().width > 10);
    assert.equal(await shown(), false);
    // Reached with the keyboard: Shift+Tab from the first answer.
    await card.locator('button', { hasText: 'Allow once' }).focus();
    await page.keyboard.press('Shift+Tab');
    assert.equal(await reason.evaluate((node) => node === document.activeElement && node.matches(':focus-visible')), true);
    assert.equal(await shown(), true);
    await page.keyboard.press('Tab');
    assert.equal(await shown(), false);
  }));

test('"you (this browser)" for this browser\'s answer, the client kind in another browser and for an API client', { timeout: TEST_TIMEOUT }, () =>
  withUi({ config: ASKS_FIRST }, async ({ page, server, otherBrowser }) => {
    const id = await startConversation(page, '/shell touch mine.txt');
    await pendingCard(page).waitFor();
    const elsewhere = await otherBrowser();
    await elsewhere.goto(`${server().base}/#/c/${encodeURIComponent(id)}`);
    await pendingCard(elsewhere).waitFor();

    await pendingCard(page).locator('button', { hasText: 'Allow once' }).click();
    const mine = page.locator('#items .approval.settled .approval-outcome');
    await mine.waitFor();
    assert.equal(await mine.textContent(), 'Allowed once by you (this browser) · $ touch mine.txt');
    const theirs = elsewhere.locator('#items .approval.settled .approval-outcome');
    await theirs.waitFor();
    assert.equal(await theirs.textContent(), 'Allowed once by the web UI · $ touch mine.txt');
    await waitIdle(page);

    // Answered by an API client (this test's own request, with the local token).
    await page.fill('#message', '/shell touch theirs.txt');
    await page.press('#message', 'Enter');
    await pendingCard(page).waitFor();
    const approval = (await (await fetch(`${server().base}/api/approvals`)).json()).approvals[0];
    assert.equal((await post(server(), `/api/approvals/${approval.id}`, { decision: 'deny' })).status, 200);
    const denied = page.locator('#items .approval.settled[data-status="denied"] .approval-outcome');
    await denied.waitFor();
    assert.equal(await denied.textContent(), 'Denied by an API client · $ touch theirs.txt');
    await elsewhere.locator('#items .approval.settled[data-status="denied"] .approval-outcome', { hasText: 'Denied by an API client' }).waitFor();
    await waitIdle(page);
  }));

test('Alt+A and Alt+D in the message box answer the waiting card, and say so', { timeout: TEST_TIMEOUT }, () =>
  withUi({ config: ASKS_FIRST }, async ({ page, server }) => {
    await startConversation(page, '/shell touch quick.txt');
    const card = pendingCard(page);
    await card.waitFor();
    const hint = card.locator('.approval-keys');
    assert.equal(await hint.isVisible(), true);
    assert.equal(await hint.textContent(), 'From the message box: Alt+A allows once, Alt+D denies (with the message).');
    assert.equal(await card.locator('button', { hasText: 'Allow once' }).getAttribute('aria-keyshortcuts'), 'Alt+A');
    assert.equal(await card.locator('button', { hasText: 'Deny' }).getAttribute('aria-keyshortcuts'), 'Alt+D');

    const announced = await recordAnnouncements(page);
    // Typing in the box is not disturbed.
    assert.equal(await page.evaluate(() => document.activeElement.id), 'message');
    await page.keyboard.type('a draft');
    await page.keyboard.press('Alt+A');
    await page.locator('#items .approval.settled[data-status="allowed"] .approval-outcome', { hasText: 'Allowed once by you (this browser)' }).waitFor();
    await announced('Allowed once by you (this browser): Shell $ touch quick.txt');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'message');
    assert.equal(await page.inputValue('#message'), 'a draft');
    await page.locator('#items .item.tool-call .tool-state.state-ran').waitFor();
    await waitIdle(page);
    assert.equal(fs.existsSync(path.join(server().cwd, 'quick.txt')), true);

    // Alt+D denies, with what the card's message field holds.
    await page.fill('#message', '/shell touch later.txt');
    await page.press('#message', 'Enter');
    await card.waitFor();
    await card.getByLabel('Message', { exact: true }).fill('not now');
    await page.focus('#message');
    await page.keyboard.press('Alt+D');
    await page.locator('#items .approval.settled[data-status="denied"]').waitFor();
    await announced('Denied by you (this browser): “not now”: Shell $ touch later.txt');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'message');
    await waitIdle(page);
    assert.equal(fs.existsSync(path.join(server().cwd, 'later.txt')), false);

    // With nothing waiting, the keys answer nothing (and the box keeps what it has).
    await page.fill('#message', 'kept');
    await page.keyboard.press('Alt+D');
    assert.equal(await page.inputValue('#message'), 'kept');
    assert.equal(await page.locator('#items .approval').count(), 2);
  }));

test('a waiting card docks above the message box, remembered; settled, its line goes back after its tool call', { timeout: TEST_TIMEOUT }, () =>
  withUi({ config: ASKS_FIRST }, async ({ page, server }) => {
    await startConversation(page, '/shell touch docked.txt');
    const card = pendingCard(page);
    await card.waitFor();
    const toggle = card.locator('button.approval-dock-toggle');
    assert.equal(await toggle.textContent(), 'Dock above the message box');
    const announced = await recordAnnouncements(page);
    await toggle.click();

    const docked = page.locator('#approvals-dock > .approval.asking');
    await docked.waitFor();
    assert.equal(await card.count(), 0);
    // Right above the message box, the focus still on the toggle, the choice kept.
    assert.equal(await page.locator('#approvals-dock + #composer').count(), 1);
    const dockToggle = docked.locator('button.approval-dock-toggle');
    assert.equal(await dockToggle.textContent(), 'Back into the conversation');
    assert.equal(await dockToggle.evaluate((button) => button === document.activeElement), true);
    assert.equal(await page.evaluate(() => localStorage.getItem('openvaala.dockApprovals')), 'on');
    await announced('Approval cards are docked above the message box.');
    await checkAxe(page, 'a docked card');
    await screenshot(page, 'approval-docked');
    await page.setViewportSize(PHONE);
    await screenshot(page, 'approval-docked-phone');
    await page.setViewportSize(DESKTOP);

    // A reload finds it docked again.
    await page.reload();
    await docked.waitFor();
    assert.equal(await card.count(), 0);

    // Answered there: its line is back after its tool call, the dock empty, the focus in the
    // message box.
    await docked.locator('button', { hasText: 'Allow once' }).click();
    const settled = page.locator('#items .item.tool-call + .approval.settled[data-status="allowed"]');
    await settled.waitFor();
    assert.equal(await page.locator('#approvals-dock').evaluate((dock) => dock.children.length === 0 && getComputedStyle(dock).display === 'none'), true);
    assert.equal(await page.evaluate(() => document.activeElement.id), 'message');
    await waitIdle(page);
    assert.equal(fs.existsSync(path.join(server().cwd, 'docked.txt')), true);

    // The next one docks at once; undocked, it goes after its call, and the choice is forgotten.
    await page.fill('#message', '/shell touch undocked.txt');
    await page.press('#message', 'Enter');
    await docked.waitFor();
    await docked.locator('button.approval-dock-toggle').click();
    await page.locator('#items .item.tool-call + .approval.asking').waitFor();
    assert.equal(await docked.count(), 0);
    assert.equal(await page.evaluate(() => document.activeElement.classList.contains('approval-dock-toggle')), true);
    assert.equal(await page.evaluate(() => localStorage.getItem('openvaala.dockApprovals')), null);
    await pendingCard(page).locator('button', { hasText: 'Deny' }).click();
    await page.locator('#items .approval.settled[data-status="denied"]').waitFor();
    await waitIdle(page);
  }));

test('with several cards waiting, the shortcuts answer the oldest, the one that shows their hint', { timeout: TEST_TIMEOUT }, () =>
  withUi(
    {
      config: `
[agents.default]
description = "the main agent, whose shell calls ask first"
model = "demo"
spawnable = ["helper"]
[agents.default.permissions]
shell = "ask"
[agents.helper]
description = "a sub-agent whose shell calls ask first"
model = "demo"
[agents.helper.permissions]
shell = "ask"
`,
    },
    async ({ page, server }) => {
      await startConversation(page, '/spawn helper: /shell touch sub.txt\n/shell touch main.txt');
      const waiting = page.locator('.approval.asking');
      await waiting.nth(1).waitFor();
      // Which one was asked first is the service's to say.
      const approvals = (await (await fetch(`${server().base}/api/approvals`)).json()).approvals;
      assert.equal(approvals.length, 2);
      const [oldest, newest] = approvals;
      const oldestCard = page.locator(`.approval.asking[data-approval="${oldest.id}"]`);
      const newestCard = page.locator(`.approval.asking[data-approval="${newest.id}"]`);
      assert.equal(await oldestCard.locator('.approval-keys').isVisible(), true);
      assert.equal(await newestCard.locator('.approval-keys').isVisible(), false);
      assert.equal(await newestCard.locator('button[aria-keyshortcuts]').count(), 0);

      await page.focus('#message');
      await page.keyboard.press('Alt+A');
      await page.locator(`.approval.settled[data-approval="${oldest.id}"][data-status="allowed"]`).waitFor();
      assert.equal(await newestCard.getAttribute('data-status'), 'pending');
      // The hint moves to the one left, and the next Alt+D denies it.
      await newestCard.locator('.approval-keys').waitFor();
      await page.keyboard.press('Alt+D');
      await page.locator(`.approval.settled[data-approval="${newest.id}"][data-status="denied"]`).waitFor();
      await waitIdle(page);
      const touched = oldest.subject.command === 'touch sub.txt' ? ['sub.txt', 'main.txt'] : ['main.txt', 'sub.txt'];
      assert.equal(fs.existsSync(path.join(server().cwd, touched[0])), true);
      assert.equal(fs.existsSync(path.join(server().cwd, touched[1])), false);
    },
  ));
