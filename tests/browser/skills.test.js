// The Agents tab lists the skills the conversation's agent sees (name, origin, description,
// the tools it narrows to), and the SKILL.md files skipped with the rule each breaks.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TEST_TIMEOUT, checkAxe, screenshot, startConversation, waitIdle, withUi } = require('./harness');

function writeSkill(dir, text) {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'SKILL.md'), text);
}

test('the Agents tab lists the skills and says why a bad one is skipped', { timeout: TEST_TIMEOUT }, () =>
  withUi(async ({ page, root }) => {
    const skills = path.join(root, 'work', '.agents', 'skills');
    writeSkill(path.join(skills, 'release'), '---\nname: release\ndescription: Cut a release of the project\nallowed-tools: [read_file, shell]\n---\nFollow the checklist.\n');
    writeSkill(path.join(skills, 'Loud'), '---\nname: Loud\ndescription: shouts\n---\nbody\n');
    await startConversation(page, 'hello');
    await waitIdle(page);
    await page.click('#tab-agents');
    const skill = page.locator('#skill-list .skill[data-skill="release"]');
    await skill.waitFor();
    assert.match(await skill.textContent(), /release from the repository\s*Cut a release of the project\s*While in use, only: read_file, shell/);
    assert.equal(await page.locator('#skill-list .skill').count(), 1);
    assert.equal(await page.locator('#skills-empty').isHidden(), true);
    const problem = page.locator('#skill-problems .skill-problem');
    await problem.waitFor();
    assert.match(await problem.textContent(), /^Skipped .*\/Loud\/SKILL\.md: `name` may hold only lowercase letters, digits and hyphens/);
    await checkAxe(page);
    await screenshot(page, 'skills-tab');
  }));
