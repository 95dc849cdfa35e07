// A Python package index in the "simple" format (PEP 503) over a directory of wheels: /simple/ lists
// the projects, /simple/<normalized-name>/ the files with their sha256, /files/<wheel> serves them.
// Links are relative, so the index reads the same through a proxy whatever host name it is reached by.
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';

/** PEP 503 normalization: runs of -, _ and . become one -, lower case. */
export function normalizeProjectName(name) {
  return name.replace(/[-_.]+/g, '-').toLowerCase();
}

const escapeHtml = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

function page(title, links) {
  return `<!DOCTYPE html>\n<html>\n  <head><meta name="pypi:repository-version" content="1.0"><title>${escapeHtml(title)}</title></head>\n  <body>\n    <h1>${escapeHtml(title)}</h1>\n${links.map((l) => `    ${l}<br>\n`).join('')}  </body>\n</html>\n`;
}

/**
 * Serves `wheels` ([{ name, version, filename, sha256, requires_python }]) from `dir` on `host`, on an
 * ephemeral port. Returns { url (…/simple/), port, close() }.
 */
export async function startPypiIndex({ host, dir, wheels }) {
  const projects = new Map();
  for (const w of wheels) {
    const key = normalizeProjectName(w.name);
    if (!projects.has(key)) projects.set(key, []);
    projects.get(key).push(w);
  }
  const files = new Map(wheels.map((w) => [w.filename, w]));

  const server = http.createServer((req, res) => {
    const send = (status, type, body, extra = {}) => {
      res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body), ...extra });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'text/plain; charset=utf-8', 'This index is read-only.\n', { allow: 'GET, HEAD' });
    let pathname;
    try {
      pathname = decodeURIComponent(new URL(req.url ?? '/', 'http://index').pathname);
    } catch {
      return send(400, 'text/plain; charset=utf-8', 'Bad request path.\n');
    }
    if (pathname === '/simple' || pathname === '/') return send(301, 'text/plain; charset=utf-8', 'See /simple/.\n', { location: '/simple/' });
    if (pathname === '/simple/') {
      const links = [...projects.keys()].sort().map((p) => `<a href="${encodeURIComponent(p)}/">${escapeHtml(p)}</a>`);
      return send(200, 'text/html; charset=utf-8', page('Simple index', links));
    }
    const project = /^\/simple\/([^/]+)(\/?)$/.exec(pathname);
    if (project) {
      const key = normalizeProjectName(project[1]);
      if (!projects.has(key)) return send(404, 'text/plain; charset=utf-8', `This mirror has no project named "${project[1]}".\n`);
      if (project[2] !== '/' || key !== project[1]) return send(301, 'text/plain; charset=utf-8', `See /simple/${key}/.\n`, { location: `/simple/${key}/` });
      const links = projects.get(key).map((w) => {
        const requires = w.requires_python ? ` data-requires-python="${escapeHtml(w.requires_python)}"` : '';
        return `<a href="../../files/${encodeURIComponent(w.filename)}#sha256=${w.sha256}"${requires}>${escapeHtml(w.filename)}</a>`;
      });
      return send(200, 'text/html; charset=utf-8', page(`Links for ${key}`, links));
    }
    const file = /^\/files\/([^/]+)$/.exec(pathname);
    if (file && files.has(file[1])) {
      const full = path.join(dir, file[1]);
      const size = fs.statSync(full).size;
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': size });
      if (req.method === 'HEAD') return res.end();
      return fs.createReadStream(full).pipe(res);
    }
    return send(404, 'text/plain; charset=utf-8', `Not found: ${pathname}\n`);
  });
  // Connections are short-lived; close() must not wait for a client's idle keep-alive socket.
  server.keepAliveTimeout = 2000;
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  const { port } = server.address();
  return {
    port,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}/simple/`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
