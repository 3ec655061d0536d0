// The skills the conversation's agent sees (in the Agents tab): each skill's name, where it
// comes from and what it is for, and the SKILL.md files skipped, each with the rule it breaks,
// so a user can fix what the agent would otherwise silently go without. Read from
// `GET /api/skills` for the conversation's working directory when the tab opens.

import { api } from './api.js';
import { $, el, enc } from './dom.js';
import { state } from './state.js';

let shownFor = null;

// Loads the list again when the tab shows another conversation (or the same one anew).
export async function refreshSkills(force = false) {
  if (!state.conv) return;
  const key = `${state.conv.id}:${state.conv.cwd}`;
  if (!force && shownFor === key) return;
  shownFor = key;
  const gen = state.gen;
  let answer;
  try {
    answer = await api('GET', `/api/skills?cwd=${enc(state.conv.cwd)}`);
  } catch (error) {
    if (gen !== state.gen) return;
    render([], [], `The skills could not be read: ${error.message}`);
    return;
  }
  if (gen !== state.gen || !answer) return;
  render(answer.skills || [], answer.problems || [], null);
}

function render(skills, problems, failure) {
  const list = $('skill-list');
  list.replaceChildren(
    ...skills.map((skill) =>
      el(
        'li',
        { class: 'skill', 'data-skill': skill.name },
        el('strong', { class: 'skill-name' }, skill.name),
        el('span', { class: 'muted' }, skill.origin === 'user' ? ' your skill' : ' from the repository'),
        el('div', { class: 'skill-description' }, skill.description),
        skill.allowed_tools ? el('div', { class: 'muted' }, `While in use, only: ${skill.allowed_tools.join(', ')}`) : null,
      ),
    ),
  );
  $('skills-empty').hidden = skills.length > 0 || !!failure;
  const skipped = $('skill-problems');
  skipped.replaceChildren(
    ...(failure ? [el('p', { class: 'skill-problem' }, failure)] : []),
    ...problems.map((problem) =>
      el('p', { class: 'skill-problem' }, 'Skipped ', el('code', {}, problem.path), `: ${problem.problem}`),
    ),
  );
  skipped.hidden = !failure && problems.length === 0;
}
