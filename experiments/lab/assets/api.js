// Talking to testbed lab's /api/: JSON on success; on a 400 the server's
// one-line message becomes the Error's message, which the page shows.
// A lab off loopback printed its address with ?token=...: every call carries it.
const token = new URLSearchParams(location.search).get('token');

export const withToken = path =>
  token ? `${path}${path.includes('?') ? '&' : '?'}token=${encodeURIComponent(token)}` : path;

export async function api(path, options = {}) {
  const headers = token ? { 'X-Lab-Token': token } : {};
  const response = await fetch(path, { ...options, headers });
  const text = await response.text();
  if (!response.ok) throw new Error(text.trim() || `${response.status} ${response.statusText}`);
  return JSON.parse(text);
}

export const $ = id => document.getElementById(id);

// 112, 38.5, 26.3: one decimal, no trailing ".0".
export const oneDecimal = x => String(Number(x.toFixed(1)));

export function svgElement(tag, attributes = {}, text) {
  const element = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  if (text !== undefined) element.textContent = text;
  return element;
}

// Fills a <select> with the collectives that pass `keep`, `selected` chosen.
export function fillCollectives(select, collectives, keep, selected) {
  select.replaceChildren(...collectives.filter(keep).map(c => {
    const option = new Option(c.name, c.name, false, c.name === selected);
    option.title = c.summary;
    return option;
  }));
}
