// The agent's plan (`update_plan`): a checklist above the message box while the agent works,
// following each new plan live and after a reload, folding to one line with the step at work;
// hidden once the turn ends; each plan item in the history as a compact checklist.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { DESKTOP, TEST_TIMEOUT, checkAxe, inEachView, screenshot, startConversation, waitIdle, waitRunning, withUi } = require('./harness');

const AGENTS = `
[agents.default]
description = "test agent"
model = "m"
tools = ["shell", "update_plan"]
`;

const plan = (explanation, ...statuses) => ({
  tool: 'update_plan',
  args: {
    explanation,
    steps: ['Read the failing test', 'Fix the parser', 'Run the whole suite'].map((step, at) => ({ step, status: statuses[at] })),
  },
});

// The steps the panel shows: [status, text].
function panelSteps(page) {
  return page.locator('#plan .plan-step').evaluateAll((steps) =>
    steps.map((step) => [step.classList[1].replace(/^step-/, ''), step.querySelector('.plan-text').textContent]),
  );
}

test('the plan shows above the message box while the agent works, and in the history', { timeout: TEST_TIMEOUT }, () =>
  withUiPlan(async ({ page, fake }) => {
    fake.push(plan('Start from the test, then fix.', 'in_progress', 'pending', 'pending'));
    const second = fake.hold(plan('The test points at the parser.', 'completed', 'in_progress', 'pending'));
    const answer = fake.hold({ text: 'The parser is fixed and the suite passes.' });
    await startConversation(page, 'Fix the build');

    // The first plan is on the page while the next model call is held: the turn is running.
    await second.requested;
    await waitRunning(page);
    const panel = page.locator('#plan');
    await panel.locator('.plan-step.step-in-progress', { hasText: 'Read the failing test' }).waitFor();
    assert.equal(await panel.isVisible(), true);
    assert.equal(await page.locator('#plan-progress').textContent(), '0 of 3 done');
    assert.equal(await panel.locator('.plan-explanation').textContent(), 'Start from the test, then fix.');
    assert.deepEqual(await panelSteps(page), [
      ['in-progress', 'Read the failing test'],
      ['pending', 'Fix the parser'],
      ['pending', 'Run the whole suite'],
    ]);
    // Screen readers hear each step's state, and which one is at work.
    assert.deepEqual(await panel.locator('.plan-step .visually-hidden').allTextContents(), ['in progress: ', 'pending: ', 'pending: ']);
    assert.equal(await panel.locator('[aria-current="step"] .plan-text').textContent(), 'Read the failing test');
    // Above the message box.
    const above = await page.evaluate(() => document.getElementById('plan').getBoundingClientRect().bottom <= document.getElementById('message').getBoundingClientRect().top);
    assert.ok(above, 'the plan is above the message box');
    // The call itself is a tool card without its JSON arguments (the plan item shows them).
    const card = page.locator('#items .item.tool-call.tool-update-plan').first();
    assert.equal(await card.locator('.tool-name').textContent(), 'Update plan');
    assert.ok(!(await card.textContent()).includes('"steps"'), await card.textContent());
    assert.equal(await card.locator('.tool-summary').textContent(), 'Plan updated: 0 of 3 steps completed.');

    await inEachView(page, async (size, scheme) => {
      await checkAxe(page, `plan panel, ${size} ${scheme}`);
      await screenshot(page, `plan-${size}-${scheme}`);
    });
    await page.setViewportSize(DESKTOP);
    await page.emulateMedia({ colorScheme: 'light' });
    await screenshot(page, 'plan-running');

    // Folded: one line, with the step at work; unfolded again on a second click.
    await page.click('#plan-toggle');
    assert.equal(await page.getAttribute('#plan-toggle', 'aria-expanded'), 'false');
    assert.equal(await page.locator('#plan-body').isHidden(), true);
    assert.equal(await page.locator('#plan-now').textContent(), 'Read the failing test');
    await checkAxe(page, 'plan panel folded');
    await page.click('#plan-toggle');
    assert.equal(await page.getAttribute('#plan-toggle', 'aria-expanded'), 'true');
    assert.equal(await page.locator('#plan-body').isVisible(), true);

    // A reload finds the current plan in the history.
    await page.reload();
    await waitRunning(page);
    await panel.locator('.plan-step.step-in-progress', { hasText: 'Read the failing test' }).waitFor();

    // The next plan replaces it live.
    second.release();
    await answer.requested;
    await panel.locator('.plan-step.step-in-progress', { hasText: 'Fix the parser' }).waitFor();
    assert.equal(await page.locator('#plan-progress').textContent(), '1 of 3 done');
    assert.deepEqual(await panelSteps(page), [
      ['completed', 'Read the failing test'],
      ['in-progress', 'Fix the parser'],
      ['pending', 'Run the whole suite'],
    ]);
    await screenshot(page, 'plan-second');

    // The turn ends: the panel goes; the history keeps both plans as checklists.
    answer.release();
    await waitIdle(page);
    assert.equal(await panel.isHidden(), true);
    const items = page.locator('#items .item.plan');
    assert.equal(await items.count(), 2);
    assert.equal(await items.nth(0).locator('.who').textContent(), 'Plan');
    assert.equal(await items.nth(1).locator('.plan-step.step-completed').count(), 1);
    assert.equal(await items.nth(1).locator('.plan-step.step-in-progress .plan-text').textContent(), 'Fix the parser');
    await checkAxe(page, 'plan items in the history');
    await screenshot(page, 'plan-history');
  }));

test('a conversation without a plan shows no plan panel while the agent works', { timeout: TEST_TIMEOUT }, () =>
  withUiPlan(async ({ page, fake }) => {
    const held = fake.hold({ text: 'Just an answer.' });
    await startConversation(page, 'Say hello');
    await held.requested;
    await waitRunning(page);
    assert.equal(await page.locator('#plan').isHidden(), true);
    held.release();
    await waitIdle(page);
    assert.equal(await page.locator('#items .item.plan').count(), 0);
  }));

function withUiPlan(body) {
  return withUi({ fake: { agents: AGENTS } }, body);
}
