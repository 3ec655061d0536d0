// Replies render as Markdown (headings, lists, emphasis, links, tables, inline code, fenced code
// with highlighting and a copy button, plain when it names no language); agent text is untrusted (raw HTML is shown as text, links
// open in a new tab without a referrer); and a long streamed reply keeps the page responsive.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, startConversation, waitIdle, withUi } = require('./harness');

const REPLY = [
  '## Plan',
  '',
  'This is **bold**, this is *emphasis*, and `inline code`.',
  '',
  '- first point',
  '- second point',
  '',
  '1. one',
  '2. two',
  '',
  'See [the docs](https://example.com/docs) for more.',
  '',
  '| name | value |',
  '|------|-------|',
  '| a    | 1     |',
  '| b    | 2     |',
  '',
  '```js',
  'const answer = 42;',
  'function hello() { return "hi"; }',
  '```',
  '',
  '```',
  'public class Listing { }',
  'drwxr-xr-x 2 user user 4096 .',
  '```',
  '',
  '<img src="/nothing.png" onerror="window.__pwned = 1">',
  '',
  'Inline <b onclick="window.__pwned = 2">html</b> and <script>window.__pwned = 3</script> stay text.',
  '',
  '![a picture](https://example.com/tracker.png)',
  '',
  '[bad link](javascript:window.__pwned=4)',
].join('\n');

async function checkRendered(page) {
  const md = page.locator('#items .item.agent-message.status-completed .md').last();
  // A finished reply is drawn in groups of blocks over a few frames: wait for its end.
  await md.locator('a', { hasText: 'bad link' }).waitFor();
  await md.locator('h2', { hasText: 'Plan' }).waitFor();
  assert.equal(await md.locator('strong').first().textContent(), 'bold');
  assert.equal(await md.locator('em').first().textContent(), 'emphasis');
  assert.equal(await md.locator('p code').first().textContent(), 'inline code');
  assert.deepEqual(await md.locator('ul > li').allTextContents(), ['first point', 'second point']);
  assert.deepEqual(await md.locator('ol > li').allTextContents(), ['one', 'two']);
  assert.deepEqual(await md.locator('table td').allTextContents(), ['a', '1', 'b', '2']);

  // Links open in a new tab, without a referrer or a handle on this page.
  const link = md.locator('a', { hasText: 'the docs' });
  assert.equal(await link.getAttribute('href'), 'https://example.com/docs');
  assert.equal(await link.getAttribute('target'), '_blank');
  assert.equal(await link.getAttribute('rel'), 'noopener noreferrer');

  // The code block: highlighted, with its language and a copy button.
  const block = md.locator('.code-block').first();
  assert.equal(await block.locator('.code-language').textContent(), 'js');
  assert.ok((await block.locator('code.hljs span.hljs-keyword').count()) >= 2, 'keywords are highlighted');
  assert.equal(await block.locator('code').textContent(), 'const answer = 42;\nfunction hello() { return "hi"; }\n');
  // A block that names no language is plain text, never guessed and coloured.
  const plain = md.locator('.code-block').nth(1);
  assert.equal(await plain.locator('.code-language').textContent(), 'text');
  assert.equal(await plain.locator('code span').count(), 0);
  assert.equal(await plain.locator('code').textContent(), 'public class Listing { }\ndrwxr-xr-x 2 user user 4096 .\n');

  // Raw HTML is text: nothing of it became an element, nothing ran, nothing was loaded.
  assert.equal(await md.locator('img, script, b, [onerror], [onclick]').count(), 0);
  const text = await md.textContent();
  assert.ok(text.includes('<img src="/nothing.png" onerror="window.__pwned = 1">'), text);
  assert.ok(text.includes('<b onclick="window.__pwned = 2">html</b>'), text);
  assert.ok(text.includes('<script>window.__pwned = 3</script>'), text);
  // An image is a link the reader may follow, never fetched by the page.
  const image = md.locator('a', { hasText: 'image: a picture' });
  assert.equal(await image.getAttribute('href'), 'https://example.com/tracker.png');
  // A javascript: link loses its target.
  const bad = md.locator('a', { hasText: 'bad link' });
  assert.equal(await bad.getAttribute('href'), null);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  return md;
}

test('a reply renders as sanitized Markdown with highlighted, copyable code', { timeout: TEST_TIMEOUT }, () =>
  withUi({ fake: true }, async ({ page, fake }) => {
    fake.push({ text: REPLY });
    await startConversation(page, 'Show me some Markdown');
    await waitIdle(page);
    const md = await checkRendered(page);

    await md.locator('.code-block button.copy-code').first().click();
    await md.locator('.code-block button.copy-code', { hasText: 'Copied' }).first().waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'const answer = 42;\nfunction hello() { return "hi"; }\n');

    // The whole answer copies as its Markdown source.
    const answer = page.locator('#items .item.agent-message.status-completed').last();
    await answer.locator('button.copy-message').click();
    await answer.locator('button.copy-message', { hasText: 'Copied' }).waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), REPLY);

    // The user's own text is shown as typed.
    assert.equal(await page.locator('#items .item.user-message .text').textContent(), 'Show me some Markdown');

    // The same from the stored history.
    await page.reload();
    await checkRendered(page);
  }));

// A long reply: paragraphs, lists, code and tables, cut into about 20,000 tokens of about four
// characters, as a model streams them.
function longReply() {
  const sections = [];
  for (let n = 1; sections.join('').length < 84_000; n++) {
    sections.push(
      `## Section ${n}\n\n`,
      `Paragraph ${n} explains **what changes** and *why*, with \`inline code\` and [a link](https://example.com/${n}). `.repeat(3),
      '\n\n',
      `- item ${n}.1 with some words\n- item ${n}.2 with more words\n- item ${n}.3\n\n`,
      '```rust\n',
      `fn section_${n}(input: &str) -> usize {\n    input.lines().filter(|line| !line.is_empty()).count() + ${n}\n}\n`,
      '```\n\n',
      `| step | result |\n|---|---|\n| ${n} | ok |\n| ${n + 1} | ok |\n\n`,
    );
  }
  const text = `${sections.join('')}The end of the long reply.`;
  const tokens = [];
  for (let i = 0; i < text.length; i += 4) tokens.push(text.slice(i, i + 4));
  return { text, tokens };
}

test('a 20,000-token reply streamed at 2 ms per token never blocks the main thread for long', { timeout: 240_000 }, () =>
  withUi({ fake: true }, async ({ page, fake, raisePriority }) => {
    const { text, tokens } = longReply();
    assert.ok(tokens.length >= 20_000, `${tokens.length} tokens`);
    const sections = (text.match(/^## Section/gm) || []).length;

    await startConversation(page, 'warm up');
    await waitIdle(page);
    // What is measured is the page's work: other programs on a shared machine should not stretch
    // its tasks by taking the CPU away (harness.js says how).
    const priority = raisePriority();
    // Long tasks (over 50 ms on the main thread) and the longest gap between two frames.
    await page.evaluate(() => {
      window.__longTasks = [];
      new PerformanceObserver((list) => {
        for (const entry of list.getEntries()) window.__longTasks.push(Math.round(entry.duration));
      }).observe({ type: 'longtask' });
      window.__frames = { count: 0, maxGap: 0, last: 0, running: true };
      const tick = (now) => {
        const frames = window.__frames;
        if (frames.last) frames.maxGap = Math.max(frames.maxGap, now - frames.last);
        frames.last = now;
        frames.count++;
        if (frames.running) requestAnimationFrame(tick);
      };
      requestAnimationFrame(tick);
    });

    fake.push({ tokens, msPerToken: 2 });
    const started = Date.now();
    await page.fill('#message', 'Write a long answer');
    await page.press('#message', 'Enter');
    await page.locator('#items .item.agent-message.status-running').waitFor();
    await page.locator('#items .item.agent-message.status-completed .md', { hasText: 'The end of the long reply.' }).waitFor({ timeout: 180_000 });
    await waitIdle(page);
    const seconds = (Date.now() - started) / 1000;

    const measured = await page.evaluate(() => {
      window.__frames.running = false;
      return { longTasks: window.__longTasks, frames: window.__frames.count, maxFrameGapMs: Math.round(window.__frames.maxGap) };
    });
    const md = page.locator('#items .item.agent-message.status-completed .md').last();
    const rendered = {
      headings: await md.locator('h2').count(),
      codeBlocks: await md.locator('.code-block code.hljs').count(),
      tables: await md.locator('table').count(),
    };
    console.log(
      `# long reply: ${tokens.length} tokens in ${seconds.toFixed(1)} s (browser priority: ${priority}); long tasks ${JSON.stringify(measured.longTasks)}; ` +
        `${measured.frames} frames, longest gap between frames ${measured.maxFrameGapMs} ms; rendered ${JSON.stringify(rendered)}`,
    );
    // A page that re-renders the whole reply per token blocks for seconds by the end; the bound
    // leaves room for a shared machine stretching a task or two, which no test can prevent.
    assert.ok(
      measured.longTasks.every((ms) => ms < 250) && measured.longTasks.length <= 5,
      `no main-thread task over 250 ms and at most 5 over 50 ms while the reply streamed: ${JSON.stringify(measured.longTasks)}`,
    );
    // Everything arrived and is rendered as Markdown, code highlighted.
    assert.deepEqual(rendered, { headings: sections, codeBlocks: sections, tables: sections });
  }));
