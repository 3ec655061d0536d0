// Waiting messages after a stop. They stay, held, while the agent is idle: each offers Send now
// (a turn with it alone; the others keep waiting) and Withdraw (its text back in the message
// box), not "Interrupt with this", which would have nothing to interrupt; and a notice by the
// message box says that they go before the next message.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, apiGet, checkAxe, conversationId, screenshot, startConversation, waitIdle, waitRunning, withUi } = require('./harness');

const row = (page, text) => page.locator('#pending-list li.pending-item', { hasText: text });

test('after a stop, a waiting message can be sent now or withdrawn, and the held ones are announced', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake, server }) => {
    // The answer has begun and the rest is held: the turn runs until Stop.
    const gate = fake.hold({ text: ' never sent: the user stops the turn first' });
    await startConversation(page, 'work on it slowly');
    const id = conversationId(page);
    await gate.write('Working on it');
    await waitRunning(page);
    for (const text of ['waiting one', 'waiting two']) {
      await page.selectOption('#mode', 'queue');
      await page.fill('#message', text);
      await page.press('#message', 'Enter');
      await row(page, text).waitFor();
    }
    // While the turn runs, a waiting message can interrupt it; it cannot be "sent now" as a turn.
    await row(page, 'waiting one').getByRole('button', { name: 'Interrupt with this' }).waitFor();
    assert.equal(await page.locator('#pending-list button', { hasText: 'Send now' }).count(), 0);
    const notice = page.locator('#held-notice');
    assert.equal(await notice.isVisible(), false, 'no notice while the agent works');

    await page.click('#interrupt');
    await page.locator('#items .turn-end.interrupted').waitFor();
    await waitIdle(page);

    // Idle: Send now and Withdraw on each, nothing to interrupt, and the notice by the box.
    await row(page, 'waiting two').getByRole('button', { name: 'Send now' }).waitFor();
    assert.equal(await page.locator('#pending-list button', { hasText: 'Interrupt with this' }).count(), 0);
    assert.equal(await page.locator('#pending-list button', { hasText: 'Steer now' }).count(), 0);
    for (const text of ['waiting one', 'waiting two']) {
      assert.deepEqual(await row(page, text).locator('button').allTextContents(), ['Send now', 'Edit', 'Withdraw']);
    }
    await notice.waitFor();
    assert.match(await notice.textContent(), /2 waiting messages will be sent before this one/);
    assert.equal(await page.getAttribute('#message', 'aria-describedby'), 'held-notice');
    await screenshot(page, 'waiting-after-stop');
    await checkAxe(page, 'waiting messages after a stop');

    // Send now on the second: a turn runs with it alone, and the first keeps waiting.
    await row(page, 'waiting two').getByRole('button', { name: 'Send now' }).click();
    await page.locator('#items .item.agent-message.status-completed', { hasText: 'Echo: waiting two' }).waitFor();
    await waitIdle(page);
    await row(page, 'waiting two').waitFor({ state: 'detached' });
    await row(page, 'waiting one').getByRole('button', { name: 'Send now' }).waitFor();
    const pending = (await apiGet(server(), `/api/conversations/${id}/pending`)).pending.map((m) => m.text);
    assert.deepEqual(pending, ['waiting one']);
    const items = (await apiGet(server(), `/api/conversations/${id}/items`)).items;
    assert.deepEqual(items.filter((item) => item.kind === 'user_message').map((item) => item.text), ['work on it slowly', 'waiting two']);
    assert.match(await notice.textContent(), /1 waiting message will be sent before this one/);
    // Focus went on to the message box, not the page.
    assert.equal(await page.evaluate(() => document.activeElement.id), 'message');

    // Withdraw the first: it leaves the list, its text is in the box, the notice goes.
    await page.fill('#message', 'half typed');
    await row(page, 'waiting one').getByRole('button', { name: 'Withdraw' }).click();
    await row(page, 'waiting one').waitFor({ state: 'detached' });
    await page.locator('#pending').waitFor({ state: 'hidden' });
    // The stream may take the row away before the answer to the withdrawal, which brings the
    // text, has come.
    await page.waitForFunction(() => document.querySelector('#message').value !== 'half typed');
    assert.equal(await page.inputValue('#message'), 'waiting one\n\nhalf typed');
    await notice.waitFor({ state: 'hidden' });
    assert.equal(await page.getAttribute('#message', 'aria-describedby'), null);
    assert.deepEqual((await apiGet(server(), `/api/conversations/${id}/pending`)).pending, []);
  }));
