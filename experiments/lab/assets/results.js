// The Results part: the course table (testbed report's Markdown) of every
// run made in this lab session, as the server keeps them.
import { api, $, withToken } from './api.js';

export async function refreshResults() {
  const results = await api('/api/results');
  $('results-json').href = withToken('/api/results');
  $('results-count').textContent = results.rows.length;
  $('results-table').textContent = results.markdown || '(no runs yet)';
}
