// SPDX-License-Identifier: LGPL-2.1-or-later
// The real `e2b` SDK's files with a `user` against hutch serve --e2b
// (test_e2b_file_owner.py). Usage: node e2b-file-owner.mjs TEMPLATE;
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY in the environment. Prints
// one JSON object: the owners (`stat -c %u`) of what it wrote and made as
// `user` and as `root`, what planted symlinks did, and the errors seen.
import { Sandbox } from 'e2b';

const template = process.argv[2];
const out = {};
const errName = (e) => (e && e.constructor ? e.constructor.name : String(e));

async function sh(sbx, cmd) {
  const r = await sbx.commands.run(cmd, { user: 'root' });
  return r.stdout.trim();
}

async function attempt(f) {
  try {
    await f();
    return 'ok';
  } catch (e) {
    return errName(e);
  }
}

async function scenario(sbx) {
  const H = '/home/user';
  if (template === 'e2bu') out.homeBefore = await sh(sbx, `stat -c %u ${H}`);
  out.writeUser = await attempt(() => sbx.files.write(`${H}/as-user.txt`, 'u\n', { user: 'user' }));
  out.writeRoot = await attempt(() => sbx.files.write(`${H}/as-root.txt`, 'r\n', { user: 'root' }));
  if (template !== 'e2bu') {
    out.write = out.writeUser;
    return;
  }
  // Parents made on the way are the user's too; an existing one keeps its owner.
  await sbx.files.write(`${H}/new/deeper/f.txt`, 'n\n', { user: 'user' });
  out.makeDir = await sbx.files.makeDir(`${H}/d1/d2`, { user: 'user' });
  await sbx.files.write(`${H}/mv-src.txt`, 'm\n', { user: 'root' });
  await sbx.files.rename(`${H}/mv-src.txt`, `${H}/m1/m2/moved.txt`, { user: 'user' });
  await sbx.files.makeDir('/tmp/rootdir', { user: 'root' });
  out.owners = (await sh(sbx, [
    `${H}/as-user.txt`, `${H}/as-root.txt`, `${H}/new`, `${H}/new/deeper`, `${H}/new/deeper/f.txt`,
    `${H}/d1`, `${H}/d1/d2`, `${H}/m1`, `${H}/m1/m2`, `${H}/m1/m2/moved.txt`, '/tmp/rootdir', H,
  ].map((p) => `stat -c %u ${p}`).join('; '))).split('\n');
  // The user can now rewrite its file in place (it could not when it was root's).
  out.rewrite = (await sbx.commands.run(`echo more >> ${H}/as-user.txt && cat ${H}/as-user.txt`,
    { user: 'user' })).stdout;
  // The attack: symlinks the sandbox planted, at the target and as a parent.
  await sh(sbx, `mkdir -p /srv/victim && echo keep > /srv/victim/file && ln -s /srv/victim/file ${H}/link && ln -s /srv/victim ${H}/linkdir`);
  out.atTarget = await attempt(() => sbx.files.write(`${H}/link`, 'evil\n', { user: 'user' }));
  out.asParent = await attempt(() => sbx.files.write(`${H}/linkdir/new.txt`, 'evil\n', { user: 'user' }));
  out.mkdirParent = await attempt(() => sbx.files.makeDir(`${H}/linkdir/sub`, { user: 'user' }));
  out.victim = (await sh(sbx, 'stat -c %u /srv/victim /srv/victim/file; cat /srv/victim/file; ls /srv/victim')).split('\n');
  out.linkNow = await sh(sbx, `stat -c '%F %u' ${H}/link`);
  // The twin: a real directory in the same place is written through.
  await sh(sbx, `mkdir ${H}/realdir && chown 1000:1000 ${H}/realdir`);
  out.realParent = await attempt(() => sbx.files.write(`${H}/realdir/new.txt`, 'ok\n', { user: 'user' }));
  out.realOwner = await sh(sbx, `stat -c %u ${H}/realdir/new.txt`);
}

const sbx = await Sandbox.create(template, { timeoutMs: 300000 });
try {
  await scenario(sbx);
} catch (e) {
  out.error = String(e && e.stack ? e.stack : e);
} finally {
  if (template !== 'e2bu')
    out.owners = (await sh(sbx, 'stat -c %u /home/user/as-root.txt 2>&1; stat -c %u /home/user/as-user.txt 2>&1 || true')).split('\n');
  await sbx.kill();
}
console.log(JSON.stringify(out));
