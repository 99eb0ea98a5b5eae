// What a user of the e2b SDK does, against lcd's E2B listener: one check
// per name (node checks.cjs NAME [ARG]), each printing "ok: WHAT" as it
// goes and failing (exit 1, the assertion on stderr) at the first thing
// that is not as the SDK's user expects.  Run by
// tests/integration/e2b.bats with E2B_API_URL, E2B_SANDBOX_URL and
// E2B_API_KEY pointing at a private lcd, and the e2b package (pinned in
// package.json) on NODE_PATH.
'use strict';
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const e2b = require('e2b');
const { Sandbox, CommandExitError, AuthenticationError, FileNotFoundError, TimeoutError, InvalidArgumentError,
	NotFoundError, SandboxError } = e2b;

const ok = (what) => console.log(`ok: ${what}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const made = [];
async function create(...args) {
	const s = await Sandbox.create(...args);
	made.push(s);
	return s;
}
async function rejects(p, cls, what) {
	try {
		await p;
	} catch (e) {
		assert.ok(e instanceof cls, `${what}: expected ${cls.name}, got ${e && e.constructor && e.constructor.name}: ${e && e.message}`);
		return e;
	}
	assert.fail(`${what}: expected ${cls.name}, nothing was thrown`);
}
const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

const checks = {
	// create; commands.run with its output streamed as it happens; exit
	// codes; envs at create and per command; cwd; stdin
	async commands() {
		const sbx = await create({ envs: { FROM_CREATE: 'c1' }, metadata: { suite: 'e2b-bats' } });
		assert.match(sbx.sandboxId, /^[0-9a-f]{12}$/);
		ok('create');
		const chunks = [];
		const t0 = Date.now();
		const r = await sbx.commands.run('echo first; sleep 1; echo second; echo oops >&2', {
			onStdout: (d) => chunks.push([Date.now() - t0, d]),
		});
		assert.equal(r.exitCode, 0);
		assert.equal(r.stdout, 'first\nsecond\n');
		assert.equal(r.stderr, 'oops\n');
		assert.deepEqual(chunks.map((c) => c[1]), ['first\n', 'second\n']);
		// the first line came while the command still ran, a second before the second
		assert.ok(chunks[1][0] - chunks[0][0] >= 800, `streamed: ${JSON.stringify(chunks)}`);
		ok('commands.run streams stdout as it comes');
		const e = await rejects(sbx.commands.run('echo out; echo err >&2; exit 3'), CommandExitError, 'exit 3');
		assert.equal(e.exitCode, 3);
		assert.equal(e.stdout, 'out\n');
		assert.equal(e.stderr, 'err\n');
		assert.equal(e.error, 'exit status 3');
		ok('a non-zero exit raises CommandExitError with its code and output');
		const env = await sbx.commands.run('echo "$FROM_CREATE $ONE $TWO"', { envs: { ONE: '1', TWO: 'two words' } });
		assert.equal(env.stdout, 'c1 1 two words\n');
		ok('envs of the sandbox and of the command');
		await sbx.files.makeDir('/work/deep/dir');
		assert.equal((await sbx.commands.run('pwd', { cwd: '/work/deep/dir' })).stdout, '/work/deep/dir\n');
		await rejects(sbx.commands.run('pwd', { cwd: '/no/such/dir' }), InvalidArgumentError, 'missing cwd');
		ok('cwd, and a missing cwd is an InvalidArgumentError');
		const cat = await sbx.commands.run('cat; echo end', { background: true, stdin: true });
		await sbx.commands.sendStdin(cat.pid, 'line one\n');
		await cat.sendStdin(new TextEncoder().encode('line two\n'));
		await cat.closeStdin();
		const got = await cat.wait();
		assert.equal(got.stdout, 'line one\nline two\nend\n');
		// without stdin: true, stdin is empty
		assert.equal((await sbx.commands.run('cat; echo done')).stdout, 'done\n');
		ok('stdin: sendStdin and closeStdin');
		const who = await sbx.commands.run('id -u; echo $HOME', { user: 'root' });
		assert.equal(who.stdout, '0\n/root\n');
		await rejects(sbx.commands.run('true', { user: 'no-such-user' }), AuthenticationError, 'unknown user');
		ok('user root, and an unknown user is an AuthenticationError');
	},

	// background commands: listed, reconnected to, killed; a command ends
	// at its timeoutMs
	async background() {
		const sbx = await create();
		const sleeper = await sbx.commands.run('sleep 600', { background: true });
		let before = '';
		const ticker = await sbx.commands.run('for i in 1 2 3 4 5 6; do echo tick$i; sleep 0.3; done',
			{ background: true, onStdout: (d) => (before += d) });
		const list = await sbx.commands.list();
		const mine = list.find((p) => p.pid === sleeper.pid);
		assert.ok(mine, `listed: ${JSON.stringify(list)}`);
		assert.equal(mine.cmd, '/bin/bash');
		assert.deepEqual(mine.args, ['-l', '-c', 'sleep 600']);
		assert.ok(list.find((p) => p.pid === ticker.pid));
		ok('background commands are listed');
		for (let i = 0; i < 100 && !before.includes('tick1'); i++)
			await sleep(50);
		await ticker.disconnect();
		let seen = '';
		const again = await sbx.commands.connect(ticker.pid, { onStdout: (d) => (seen += d) });
		const res = await again.wait();
		assert.equal(res.exitCode, 0);
		assert.ok(seen.includes('tick6') && !seen.includes('tick1'), `after reconnecting: ${JSON.stringify(seen)}`);
		ok('a disconnected command runs on; connect gets its later output and end');
		assert.equal(await sbx.commands.kill(sleeper.pid), true);
		const e = await rejects(sleeper.wait(), CommandExitError, 'killed');
		assert.equal(e.exitCode, -1);
		assert.equal(e.error, 'signal: killed');
		assert.equal((await sbx.commands.list()).find((p) => p.pid === sleeper.pid), undefined);
		assert.equal(await sbx.commands.kill(sleeper.pid), false);
		await rejects(sbx.commands.connect(sleeper.pid), NotFoundError, 'connect to a killed command');
		ok('kill: the command ends (signal: killed), is no longer listed, a second kill is false');
		const t0 = Date.now();
		await rejects(sbx.commands.run('sleep 30', { timeoutMs: 1500 }), TimeoutError, 'timeoutMs');
		assert.ok(Date.now() - t0 < 10000);
		assert.equal((await sbx.commands.list()).length, 0);
		// and it is gone from the sandbox too
		assert.equal((await sbx.commands.run('pgrep -x sleep || echo none')).stdout, 'none\n');
		ok('a command is killed at its timeoutMs (TimeoutError)');
		const h = await sbx.commands.run('sleep 600', { background: true });
		assert.equal(await h.kill(), true);
		await rejects(h.wait(), CommandExitError, 'handle kill');
		ok('CommandHandle.kill');
		// SIGTERM (envd's other signal; the SDK itself sends SIGKILL only)
		let termOut = '';
		const trapper = await sbx.commands.run("trap 'echo got TERM; exit 3' TERM; echo ready; while :; do sleep 0.1; done",
			{ background: true, onStdout: (d) => (termOut += d) });
		for (let i = 0; i < 50 && !termOut.includes('ready'); i++)
			await sleep(100);
		const res2 = await fetch(`${process.env.E2B_SANDBOX_URL}/process.Process/SendSignal`, {
			method: 'POST',
			headers: { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': sbx.envdAccessToken },
			body: JSON.stringify({ process: { pid: trapper.pid }, signal: 'SIGNAL_SIGTERM' }),
		});
		assert.equal(res2.status, 200);
		const te = await rejects(trapper.wait(), CommandExitError, 'SIGTERM');
		assert.equal(te.exitCode, 3);
		assert.ok(te.stdout.includes('got TERM'), te.stdout);
		ok('SendSignal SIGTERM reaches the command, which may catch it');
	},

	// files: text and binary, list, exists, makeDir, rename, remove
	async files() {
		const sbx = await create();
		const info = await sbx.files.write('/work/notes/hello.txt', 'hello, lcd\n');
		assert.equal(info.path, '/work/notes/hello.txt');
		assert.equal(info.name, 'hello.txt');
		assert.equal(await sbx.files.read('/work/notes/hello.txt'), 'hello, lcd\n');
		assert.equal((await sbx.commands.run('cat /work/notes/hello.txt')).stdout, 'hello, lcd\n');
		ok('text written and read (parents made), the sandbox sees it');
		const all = new Uint8Array(256).map((_, i) => i);
		await sbx.files.write('/work/bin/all.bin', all);
		const back = await sbx.files.read('/work/bin/all.bin', { format: 'bytes' });
		assert.deepEqual(Buffer.from(back), Buffer.from(all));
		const big = crypto.randomBytes(5 * 1024 * 1024);
		await sbx.files.write('/work/bin/big.bin', big);
		assert.equal(sha(Buffer.from(await sbx.files.read('/work/bin/big.bin', { format: 'bytes' }))), sha(big));
		assert.equal((await sbx.commands.run('sha256sum /work/bin/big.bin')).stdout.split(' ')[0], sha(big));
		const blob = await sbx.files.read('/work/bin/all.bin', { format: 'blob' });
		assert.equal(blob.size, 256);
		let streamed = 0;
		for await (const c of await sbx.files.read('/work/bin/big.bin', { format: 'stream' }))
			streamed += c.length;
		assert.equal(streamed, big.length);
		await sbx.files.write('/work/bin/octet.bin', big.subarray(0, 1000), { useOctetStream: true });
		assert.equal(sha(Buffer.from(await sbx.files.read('/work/bin/octet.bin', { format: 'bytes' }))), sha(big.subarray(0, 1000)));
		await sbx.files.write('/work/empty', '');
		assert.equal(await sbx.files.read('/work/empty'), '');
		ok('binary: 256 byte values, 5 MiB, as bytes, blob, stream; octet-stream uploads; an empty file');
		const many = await sbx.files.write([{ path: '/work/m/a.txt', data: 'A' }, { path: '/work/m/b.txt', data: 'B' }]);
		assert.deepEqual(many.map((f) => f.path), ['/work/m/a.txt', '/work/m/b.txt']);
		const entries = await sbx.files.list('/work');
		assert.deepEqual(entries.map((e) => [e.name, e.type]), [['bin', 'dir'], ['empty', 'file'], ['m', 'dir'], ['notes', 'dir']]);
		const hello = (await sbx.files.list('/work/notes'))[0];
		assert.equal(hello.size, 11);
		assert.equal(hello.path, '/work/notes/hello.txt');
		assert.equal(hello.permissions, '-rw-r--r--');
		assert.ok(hello.modifiedTime instanceof Date && Math.abs(hello.modifiedTime - Date.now()) < 60000);
		const deep = await sbx.files.list('/work', { depth: 2 });
		assert.ok(deep.find((e) => e.path === '/work/m/b.txt'));
		ok('list (and depth 2)');
		assert.equal(await sbx.files.exists('/work/notes/hello.txt'), true);
		assert.equal(await sbx.files.exists('/work/notes/none.txt'), false);
		assert.equal(await sbx.files.makeDir('/work/new/sub'), true);
		assert.equal(await sbx.files.makeDir('/work/new/sub'), false);
		assert.equal((await sbx.files.getInfo('/work/new/sub')).type, 'dir');
		ok('exists, makeDir (false when it exists), getInfo');
		const tagged = await sbx.files.write('/work/meta.txt', 'm', { metadata: { Owner: 'alice', stage: 'draft 1' } });
		assert.deepEqual(tagged.metadata, { owner: 'alice', stage: 'draft 1' });
		assert.deepEqual((await sbx.files.getInfo('/work/meta.txt')).metadata, { owner: 'alice', stage: 'draft 1' });
		assert.deepEqual((await sbx.files.list('/work')).find((e) => e.name === 'meta.txt').metadata, { owner: 'alice', stage: 'draft 1' });
		await sbx.files.write('/work/meta.txt', 'n');
		assert.equal((await sbx.files.getInfo('/work/meta.txt')).metadata, undefined);
		await sbx.files.remove('/work/meta.txt');
		ok('file metadata: kept on write (keys lowercased), shown by getInfo and list, replaced by the next write');
		const moved = await sbx.files.rename('/work/notes/hello.txt', '/work/moved/hi.txt');
		assert.equal(moved.path, '/work/moved/hi.txt');
		assert.equal(await sbx.files.exists('/work/notes/hello.txt'), false);
		assert.equal(await sbx.files.read('/work/moved/hi.txt'), 'hello, lcd\n');
		await rejects(sbx.files.rename('/work/nothing', '/work/x'), FileNotFoundError, 'rename a missing file');
		ok('rename');
		await sbx.files.remove('/work/m');
		await sbx.files.remove('/work/moved/hi.txt');
		await sbx.files.remove('/work/never-was');
		assert.equal(await sbx.files.exists('/work/m/a.txt'), false);
		assert.equal(await sbx.files.exists('/work/moved/hi.txt'), false);
		ok('remove (a directory with what is in it, a file)');
		await rejects(sbx.files.read('/work/none.txt'), FileNotFoundError, 'read a missing file');
		await rejects(sbx.files.read('/work'), InvalidArgumentError, 'read a directory');
		await rejects(sbx.files.list('/work/empty'), InvalidArgumentError, 'list a file');
		ok('a missing file is a FileNotFoundError, a directory read an InvalidArgumentError');
		await sbx.files.write('rel.txt', 'relative');
		assert.equal((await sbx.commands.run('cat rel.txt')).stdout, 'relative');
		assert.equal(await sbx.files.read('rel.txt'), 'relative');
		ok('a relative path is where commands start');
	},

	// each sandbox's access token reaches its own sandbox only; signed URLs
	async tokens() {
		const a = await create();
		const b = await create();
		await a.files.write('/work/secret.txt', 'for a only');
		await b.files.write('/work/secret.txt', 'for b only');
		const url = process.env.E2B_SANDBOX_URL;
		const post = (sbx, token, path, body) =>
			fetch(`${url}${path}`, {
				method: 'POST',
				headers: { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983',
					   ...(token ? { 'X-Access-Token': token } : {}) },
				body: JSON.stringify(body),
			});
		const own = await post(b, b.envdAccessToken, '/process.Process/List', {});
		assert.equal(own.status, 200);
		const cross = await post(b, a.envdAccessToken, '/process.Process/List', {});
		assert.equal(cross.status, 401);
		assert.equal((await cross.json()).code, 'unauthenticated');
		assert.equal((await post(b, null, '/filesystem.Filesystem/Stat', { path: '/work/secret.txt' })).status, 401);
		const read = (sbx, token, path) =>
			fetch(`${url}/files?path=${encodeURIComponent(path)}`, {
				headers: { 'E2b-Sandbox-Id': sbx.sandboxId, ...(token ? { 'X-Access-Token': token } : {}) },
			});
		assert.equal((await read(b, a.envdAccessToken, '/work/secret.txt')).status, 401);
		assert.equal(await (await read(b, b.envdAccessToken, '/work/secret.txt')).text(), 'for b only');
		ok("a sandbox's access token reaches its own envd only (401 for another's)");
		assert.notEqual(a.envdAccessToken, b.envdAccessToken);
		const again = await Sandbox.connect(a.sandboxId);
		assert.equal(again.envdAccessToken, a.envdAccessToken);
		ok('connect hands out the same token');
		// signed URLs: a download with nothing but the URL; an upload
		const dl = await a.downloadUrl('/work/secret.txt');
		assert.match(dl, /signature=v1_/);
		const res = await fetch(dl);
		assert.equal(res.status, 200);
		assert.equal(await res.text(), 'for a only');
		const forged = new URL(dl);
		forged.searchParams.set('path', '/etc/shadow');
		assert.equal((await fetch(forged)).status, 401);
		const expiring = await a.downloadUrl('/work/secret.txt', { useSignatureExpiration: 60 });
		assert.equal(await (await fetch(expiring)).text(), 'for a only');
		const expired = await a.downloadUrl('/work/secret.txt', { useSignatureExpiration: -10 });
		assert.equal((await fetch(expired)).status, 401);
		const up = await a.uploadUrl('/work/uploaded.txt');
		const form = new FormData();
		form.append('file', new Blob(['sent by url']), '/work/uploaded.txt');
		const upRes = await fetch(up, { method: 'POST', body: form });
		assert.equal(upRes.status, 200, await upRes.clone().text());
		assert.equal(await a.files.read('/work/uploaded.txt'), 'sent by url');
		assert.equal(await b.files.exists('/work/uploaded.txt'), false);
		// the URL signs its path: a part that names another file still goes there
		const sneaky = new FormData();
		sneaky.append('file', new Blob(['elsewhere?']), '/work/other.txt');
		assert.equal((await fetch(up, { method: 'POST', body: sneaky })).status, 200);
		assert.equal(await a.files.exists('/work/other.txt'), false);
		assert.equal(await a.files.read('/work/uploaded.txt'), 'elsewhere?');
		ok('signed download and upload URLs (a changed path or an expired signature: 401)');
	},

	// Sandbox.list, Sandbox.connect, getInfo, isRunning, kill
	async lifecycle() {
		const tag = `run-${Date.now()}`;
		const a = await create({ metadata: { tag, role: 'first', 'app.kind/x': 'a b&c=d %20' } });
		const b = await create({ metadata: { tag, role: 'second' } });
		const listed = await Sandbox.list({ query: { metadata: { tag } } }).nextItems();
		assert.deepEqual(listed.map((s) => s.sandboxId).sort(), [a.sandboxId, b.sandboxId].sort());
		const first = listed.find((s) => s.sandboxId === a.sandboxId);
		assert.deepEqual(first.metadata, { tag, role: 'first', 'app.kind/x': 'a b&c=d %20' });
		assert.equal(first.state, 'running');
		assert.equal(first.templateId, 'base');
		assert.ok(first.startedAt instanceof Date && first.endAt > first.startedAt);
		const one = await Sandbox.list({ query: { metadata: { 'app.kind/x': 'a b&c=d %20' } } }).nextItems();
		assert.deepEqual(one.map((s) => s.sandboxId), [a.sandboxId]);
		const pages = Sandbox.list({ limit: 1, query: { metadata: { tag } } });
		const p1 = await pages.nextItems();
		assert.equal(p1.length, 1);
		assert.equal(pages.hasNext, true);
		const p2 = await pages.nextItems();
		assert.equal(p2.length, 1);
		assert.notEqual(p1[0].sandboxId, p2[0].sandboxId);
		assert.equal(pages.hasNext, false);
		ok('Sandbox.list: metadata, a metadata filter, pages');
		const info = await a.getInfo();
		assert.equal(info.sandboxId, a.sandboxId);
		assert.equal(info.state, 'running');
		assert.deepEqual(info.metadata, { tag, role: 'first', 'app.kind/x': 'a b&c=d %20' });
		ok('getInfo');
		const c = await Sandbox.connect(a.sandboxId);
		assert.equal((await c.commands.run('echo via connect')).stdout, 'via connect\n');
		await c.files.write('/work/x', 'seen by both');
		assert.equal(await a.files.read('/work/x'), 'seen by both');
		ok('Sandbox.connect');
		assert.equal(await a.isRunning(), true);
		assert.equal(await a.kill(), true);
		assert.equal(await a.isRunning(), false);
		assert.equal(await Sandbox.kill(a.sandboxId), false);
		await rejects(a.getInfo(), NotFoundError, 'getInfo after kill');
		await rejects(Sandbox.connect(a.sandboxId), NotFoundError, 'connect after kill');
		await rejects(a.commands.run('true'), SandboxError, 'run after kill');
		const after = await Sandbox.list({ query: { metadata: { tag } } }).nextItems();
		assert.deepEqual(after.map((s) => s.sandboxId), [b.sandboxId]);
		ok('kill: not running, not listed, not found; a second kill is false');
		await rejects(Sandbox.create('no-such-template'), SandboxError, 'unknown template');
		const badKey = await rejects(Sandbox.create({ metadata: { 'a key with spaces': 'v' } }), SandboxError, 'label key');
		assert.equal(badKey.statusCode, 400);
		assert.match(badKey.message, /metadata 'a key with spaces'.*label key/);
		ok('an unknown template, or a metadata key that is no lcd label key, is refused');
	},

	// a wrong key, for each kind of call
	async wrongkey() {
		const bad = { apiKey: 'not-the-token-0123456789' };
		await rejects(Sandbox.create(bad), AuthenticationError, 'create');
		await rejects(Sandbox.list(bad).nextItems(), AuthenticationError, 'list');
		const s = await create();
		await rejects(Sandbox.connect(s.sandboxId, bad), AuthenticationError, 'connect');
		await rejects(Sandbox.kill(s.sandboxId, bad), AuthenticationError, 'kill');
		await rejects(Sandbox.getInfo(s.sandboxId, bad), AuthenticationError, 'getInfo');
		assert.equal(await s.isRunning(), true);
		ok('a wrong API key is an AuthenticationError, and changes nothing');
	},

	// a sandbox ends at its timeout; setTimeout moves the end
	async timeout() {
		const short = await create({ timeoutMs: 3000 });
		const kept = await create({ timeoutMs: 3000 });
		assert.equal(await short.isRunning(), true);
		await kept.setTimeout(60000);
		const end = (await kept.getInfo()).endAt;
		assert.ok(end - Date.now() > 50000, `endAt ${end.toISOString()}`);
		await sleep(5000);
		assert.equal(await short.isRunning(), false);
		await rejects(short.getInfo(), NotFoundError, 'getInfo after its timeout');
		await rejects(short.commands.run('true'), SandboxError, 'run after its timeout');
		assert.equal(await kept.isRunning(), true);
		assert.equal((await kept.commands.run('echo alive')).stdout, 'alive\n');
		ok('a sandbox ends at its timeout; setTimeout extends another');
		await kept.setTimeout(1000);
		await sleep(2500);
		assert.equal(await kept.isRunning(), false);
		ok('setTimeout shortens it too');
	},

	// pause and connect; fork; snapshots
	async pausefork() {
		const sbx = await create();
		await sbx.files.write('/work/keep.txt', 'kept');
		const bg = await sbx.commands.run('sleep 600', { background: true });
		assert.equal(await sbx.pause(), true);
		assert.equal(await sbx.isRunning(), false);
		assert.equal((await sbx.getInfo()).state, 'paused');
		assert.ok((await Sandbox.list({ query: { state: ['paused'] } }).nextItems()).find((s) => s.sandboxId === sbx.sandboxId));
		await rejects(sbx.commands.run('true'), SandboxError, 'run while paused');
		assert.equal(await sbx.pause(), false);
		ok('pause: not running, listed as paused, a second pause is false');
		const back = await Sandbox.connect(sbx.sandboxId);
		assert.equal(await back.isRunning(), true);
		assert.equal(await back.files.read('/work/keep.txt'), 'kept');
		assert.ok((await back.commands.list()).find((p) => p.pid === bg.pid), 'the command lives on');
		ok('connect resumes it, with its files and commands');
		const forks = await sbx.fork({ count: 2 });
		assert.equal(forks.length, 2);
		for (const f of forks) {
			assert.ok(f instanceof Sandbox, String(f));
			made.push(f);
			assert.equal(await f.files.read('/work/keep.txt'), 'kept');
			await f.files.write('/work/keep.txt', `changed in ${f.sandboxId}`);
		}
		assert.equal(await sbx.files.read('/work/keep.txt'), 'kept');
		ok('fork: two sandboxes with its files, each its own');
		const snap = await sbx.createSnapshot({ name: 'bats' });
		const from = await create(snap.snapshotId);
		assert.equal(await from.files.read('/work/keep.txt'), 'kept');
		const snaps = await sbx.listSnapshots().nextItems();
		assert.ok(snaps.find((s) => s.snapshotId === snap.snapshotId), JSON.stringify(snaps));
		assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true);
		assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false);
		ok('snapshot: a new sandbox from it; listed; deleted');
	},

	// a terminal; watching a directory
	async ptywatch() {
		const sbx = await create();
		let out = '';
		const term = await sbx.pty.create({ cols: 100, rows: 30, onData: (d) => (out += new TextDecoder().decode(d)) });
		await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size; tty\n'));
		for (let i = 0; i < 50 && !/\/dev\/pts\/\d+/.test(out); i++)
			await sleep(100);
		assert.ok(out.includes('30 100'), out);
		assert.match(out, /\/dev\/pts\/\d+/);
		await sbx.pty.resize(term.pid, { cols: 120, rows: 40 });
		await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size; exit 7\n'));
		const e = await rejects(term.wait(), CommandExitError, 'pty exit 7');
		assert.equal(e.exitCode, 7);
		assert.ok(out.includes('40 120'), out);
		ok('pty: a terminal of its size, resized, its exit');
		await sbx.files.makeDir('/work/watched');
		const events = [];
		const w = await sbx.files.watchDir('/work/watched', (ev) => events.push(`${ev.type} ${ev.name}`), { recursive: true });
		await sbx.files.write('/work/watched/a.txt', 'a');
		await sbx.commands.run('mkdir /work/watched/sub && echo b > /work/watched/sub/b.txt && rm /work/watched/a.txt');
		for (let i = 0; i < 50 && !events.includes('remove a.txt'); i++)
			await sleep(100);
		await w.stop();
		for (const want of ['create a.txt', 'write a.txt', 'create sub', 'create sub/b.txt', 'write sub/b.txt', 'remove a.txt'])
			assert.ok(events.includes(want), `${want} in ${JSON.stringify(events)}`);
		ok('watchDir (recursive): create, write, remove');
		const withEntry = [];
		const w2 = await sbx.files.watchDir('/work/watched', (ev) => withEntry.push(ev), { includeEntry: true });
		await sbx.files.write('/work/watched/c.txt', 'four');
		for (let i = 0; i < 50 && !withEntry.find((e) => e.type === 'write' && e.entry && e.entry.size === 4); i++)
			await sleep(100);
		await w2.stop();
		const last = withEntry.find((e) => e.type === 'write' && e.entry && e.entry.size === 4);
		assert.ok(last, JSON.stringify(withEntry));
		assert.equal(last.entry.path, '/work/watched/c.txt');
		assert.equal(last.entry.type, 'file');
		ok('watchDir with includeEntry');
	},

	// a task's token as the API key: its task's sandboxes only
	async tasktoken(held, operators) {
		const listed = await Sandbox.list().nextItems();
		assert.deepEqual(listed.map((s) => s.sandboxId), [held]);
		assert.deepEqual(listed[0].metadata, { held: 'yes' });
		const h = await Sandbox.connect(held);
		assert.equal((await h.commands.run('echo from the task key')).stdout, 'from the task key\n');
		ok("a task's key lists and reaches its task's sandbox");
		await rejects(Sandbox.connect(operators), NotFoundError, "the operator's sandbox");
		await rejects(Sandbox.getInfo(operators), NotFoundError, "the operator's sandbox's info");
		assert.equal(await Sandbox.kill(operators), false);
		ok("the operator's sandbox is not found with it");
		const mine = await create({ metadata: { by: 'task' } });
		assert.equal((await mine.commands.run('echo made by the task')).stdout, 'made by the task\n');
		assert.deepEqual((await Sandbox.list().nextItems()).map((s) => s.sandboxId).sort(), [held, mine.sandboxId].sort());
		ok('it makes sandboxes of its own (its app counts them)');
	},

	// what envd does through lcd's runner, made by lcd itself once it is gone
	async norunner() {
		const sbx = await create();
		await sbx.files.write('/work/a/b.txt', 'still');
		assert.equal(await sbx.files.read('/work/a/b.txt'), 'still');
		assert.equal((await sbx.files.list('/work/a'))[0].name, 'b.txt');
		assert.equal((await sbx.files.rename('/work/a/b.txt', '/work/c.txt')).path, '/work/c.txt');
		await sbx.files.remove('/work/a');
		assert.equal(await sbx.files.exists('/work/a'), false);
		const events = [];
		const w = await sbx.files.watchDir('/work', (ev) => events.push(`${ev.type} ${ev.name}`));
		await sbx.files.write('/work/w.txt', 'w');
		for (let i = 0; i < 50 && !events.includes('create w.txt'); i++)
			await sleep(100);
		await w.stop();
		assert.ok(events.includes('create w.txt'), JSON.stringify(events));
		ok('files and watches');
		const cat = await sbx.commands.run('cat', { background: true, stdin: true });
		await cat.sendStdin('in\n');
		await cat.closeStdin();
		assert.equal((await cat.wait()).stdout, 'in\n');
		const bg = await sbx.commands.run('sleep 600', { background: true });
		assert.equal(await bg.kill(), true);
		await rejects(bg.wait(), CommandExitError, 'killed');
		assert.equal((await sbx.commands.run('echo $((2 + 3))', { user: 'root' })).stdout, '5\n');
		ok('commands, stdin, kill');
	},

	// an image that has no bash: the SDK's /bin/bash -l -c runs with sh
	async nobash(template) {
		const sbx = await create(template);
		assert.equal((await sbx.commands.run('test -e /bin/bash || echo no bash; echo $((6 * 7))')).stdout, 'no bash\n42\n');
		await sbx.files.write('/data/f.txt', 'busybox');
		assert.equal((await sbx.commands.run('cat /data/f.txt')).stdout, 'busybox');
		ok(`template ${template}: commands run with /bin/sh, files work`);
	},
};

(async () => {
	const name = process.argv[2];
	if (!checks[name]) {
		console.error(`usage: node checks.cjs {${Object.keys(checks).join('|')}} [ARG]`);
		process.exit(2);
	}
	let failed = false;
	try {
		await checks[name](process.argv[3]);
	} catch (e) {
		failed = true;
		console.error(`FAILED ${name}:`, e && e.stack ? e.stack : e);
	}
	for (const s of made)
		await s.kill().catch(() => {});
	process.exit(failed ? 1 : 0);
})();
