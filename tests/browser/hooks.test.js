// Hooks on the page: each configured hook that ran shows as a small line under the item it was
// about (which hook, what came of it, how long it took, its reason or context): a
// `pre_tool_use` hook under the tool card, a `user_message` hook under the message.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, checkAxe, screenshot, startConversation, waitIdle, withUi } = require('./harness');

const HOOKED_AGENT = `
[agents.default]
description = "test agent"
model = "m"
tools = ["list_dir"]

[[hooks.pre_tool_use]]
matcher = "list_dir"
command = "printf '%s' '{\\"decision\\": \\"allow\\", \\"reason\\": \\"listing is fine\\"}'"

[[hooks.user_message]]
command = "echo 'Ticket ABC-1 is open.'"
`;

test('the hooks that ran show under the message and the call they were about', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: { agents: HOOKED_AGENT } }, async ({ page, fake }) => {
    fake.push({ tool: 'list_dir', args: {} }, { text: 'Listed.' });
    await startConversation(page, 'list the files');
    await page.locator('#items .item.agent-message', { hasText: 'Listed.' }).waitFor();
    await waitIdle(page);

    const message = page.locator('#items .item.user-message .hook-run');
    assert.match(await message.textContent(), /^hooks\.user_message\[0\] · added context · \d+ ms — Ticket ABC-1 is open\.$/);
    const call = page.locator('#items .tool-list-dir .hook-run');
    assert.match(await call.textContent(), /^hooks\.pre_tool_use\[0\] · allowed · \d+ ms — listing is fine$/);
    // The model read the context after the user's words.
    const sent = JSON.stringify(fake.requests[0].body);
    assert.match(sent, /list the files\\n\\n\[hook hooks\.user_message\[0\]: Ticket ABC-1 is open\.\]/);
    await checkAxe(page);
    await screenshot(page, 'hooks-lines');
  }));
