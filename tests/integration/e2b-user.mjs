// SPDX-License-Identifier: LGPL-2.1-or-later
// The real `e2b` SDK's `user` option against hutch serve --e2b
// (test_e2b_user.py). Usage: node e2b-user.mjs TEMPLATE; E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY in the environment. Prints one JSON
// object: what `id -u` said as the default user, as "user" and as "root".
import { Sandbox, CommandExitError } from 'e2b';

const template = process.argv[2];
const out = {};

async function idAs(sbx, opts) {
  try {
    const r = await sbx.commands.run('id -u; id -un', opts);
    return r.stdout.trim().split('\n');
  } catch (e) {
    if (e instanceof CommandExitError) return { exitCode: e.exitCode, stderr: e.stderr };
    throw e;
  }
}

const sbx = await Sandbox.create(template, { timeoutMs: 300000 });
try {
  out.default = await idAs(sbx, {});
  out.user = await idAs(sbx, { user: 'user' });
  out.root = await idAs(sbx, { user: 'root' });
  // A background command as root: the user reaches every Start.
  const h = await sbx.commands.run('id -u', { user: 'root', background: true });
  out.background = (await h.wait()).stdout.trim();
} catch (e) {
  out.error = String(e && e.stack ? e.stack : e);
} finally {
  await sbx.kill();
}
console.log(JSON.stringify(out));
