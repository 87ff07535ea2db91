// SPDX-License-Identifier: LGPL-2.1-or-later
// The real `e2b` SDK's file calls without a `user` against hutch serve
// --e2b (test_e2b_default_owner.py). Usage: node e2b-default-owner.mjs
// TEMPLATE; E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY in the
// environment. Prints one JSON object: the uid a command without a user
// runs as, and the owners (`stat -c %u`) of what files.write, makeDir and
// rename made without a user and with `{user: 'root'}`.
import { Sandbox } from 'e2b';

const template = process.argv[2];
const out = {};

async function sh(sbx, cmd) {
  const r = await sbx.commands.run(cmd, { user: 'root' });
  return r.stdout.trim();
}

async function scenario(sbx) {
  const D = '/home/user';
  out.commandUid = (await sbx.commands.run('id -u')).stdout.trim();
  await sbx.files.write(`${D}/plain.txt`, 'p\n');
  await sbx.files.write(`${D}/new/deeper/f.txt`, 'n\n');
  out.makeDir = await sbx.files.makeDir(`${D}/d1/d2`);
  await sbx.files.write(`${D}/mv-src.txt`, 'm\n', { user: 'root' });
  await sbx.files.rename(`${D}/mv-src.txt`, `${D}/m1/moved.txt`);
  await sbx.files.write(`${D}/as-root.txt`, 'r\n', { user: 'root' });
  out.owners = (await sh(sbx, [
    `${D}/plain.txt`, `${D}/new`, `${D}/new/deeper`, `${D}/new/deeper/f.txt`, `${D}/d1`,
    `${D}/d1/d2`, `${D}/m1`, `${D}/m1/moved.txt`, `${D}/as-root.txt`,
  ].map((p) => `stat -c %u ${p}`).join('; '))).split('\n');
}

const sbx = await Sandbox.create(template, { timeoutMs: 300000 });
try {
  await scenario(sbx);
} catch (e) {
  out.error = String(e && e.stack ? e.stack : e);
} finally {
  await sbx.kill();
}
console.log(JSON.stringify(out));
