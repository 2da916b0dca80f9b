import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The agent as a per-user launchd service (a LaunchAgent): started at login,
 * restarted after a crash and not after a clean stop, its output in
 * ~/Library/Logs/Relaybox/. Every action is a list of steps (files to write or
 * remove, commands to run), so `--dry-run` prints exactly what a real run does.
 */
export const serviceLabel = 'com.relaybox.relay';

export interface ServicePaths {
  plist: string;
  logDir: string;
  stdout: string;
  stderr: string;
}

export function servicePaths(home = homedir()): ServicePaths {
  const logDir = join(home, 'Library', 'Logs', 'Relaybox');
  return {
    plist: join(home, 'Library', 'LaunchAgents', `${serviceLabel}.plist`),
    logDir,
    stdout: join(logDir, 'relay.log'),
    stderr: join(logDir, 'relay.err.log'),
  };
}

/**
 * launchd starts a service with a bare PATH, and the agent's script finds `node` through it. First the
 * folder the installing shell found `node` in: a link such as /opt/homebrew/bin/node that outlives an
 * upgrade. This Node's own folder comes last: `process.execPath` is the resolved, versioned binary
 * (/opt/homebrew/Cellar/node/22.1.0/bin/node) that the next `brew upgrade` removes.
 */
export function servicePath(shellPath = process.env.PATH ?? '', nodePath = process.execPath): string {
  const shellNode = shellPath.split(':').find((dir) => isAbsolute(dir) && existsSync(join(dir, 'node')));
  const dirs = [shellNode, '/opt/homebrew/bin', '/usr/local/bin', '/usr/bin', '/bin', '/usr/sbin', '/sbin'];
  return [...new Set([...dirs.filter((d) => d !== undefined), dirname(nodePath)])].join(':');
}

/** The relaybox-relay command this process was started from: a script that runs with `node` from PATH. */
export const agentBin = fileURLToPath(new URL('../bin/relaybox-relay.js', import.meta.url));

/** npx keeps what it runs in a cache that npm clears: a service must run an installed agent. */
export const inNpxCache = (bin: string) => bin.split(sep).includes('_npx');

export type PlistValue = string | number | boolean | PlistValue[] | { [key: string]: PlistValue };

/**
 * The LaunchAgent's property list; `connectArgs` are the `relaybox-relay connect` flags it runs with.
 * The program is the agent's own script, never a Node binary's path: see `servicePath`.
 */
export function launchAgentPlist(
  connectArgs: string[],
  paths: ServicePaths,
  shellPath = process.env.PATH ?? '',
): Record<string, PlistValue> {
  return {
    Label: serviceLabel,
    ProgramArguments: [agentBin, 'connect', ...connectArgs],
    RunAtLoad: true,
    // Restarted when it exits with an error (a crash, a lost chat.db); a clean stop (exit 0) stays stopped.
    KeepAlive: { SuccessfulExit: false },
    // launchd waits this long between restarts, so a relay that cannot start does not spin.
    ThrottleInterval: 30,
    ProcessType: 'Background',
    EnvironmentVariables: { PATH: servicePath(shellPath) },
    StandardOutPath: paths.stdout,
    StandardErrorPath: paths.stderr,
  };
}

const escapeXml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function plistXml(value: PlistValue, indent: string): string {
  if (typeof value === 'string') return `${indent}<string>${escapeXml(value)}</string>`;
  if (typeof value === 'boolean') return `${indent}<${value}/>`;
  if (typeof value === 'number') return `${indent}<integer>${Math.trunc(value)}</integer>`;
  if (Array.isArray(value))
    return [`${indent}<array>`, ...value.map((v) => plistXml(v, `${indent}\t`)), `${indent}</array>`].join('\n');
  const entries = Object.entries(value).flatMap(([key, v]) => [
    `${indent}\t<key>${escapeXml(key)}</key>`,
    plistXml(v, `${indent}\t`),
  ]);
  return [`${indent}<dict>`, ...entries, `${indent}</dict>`].join('\n');
}

/** An XML property list, as launchd and `plutil` read it. */
export function toPlist(value: Record<string, PlistValue>): string {
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">',
    '<plist version="1.0">',
    plistXml(value, ''),
    '</plist>',
    '',
  ].join('\n');
}

export type ServiceStep =
  | { kind: 'write'; path: string; text: string }
  | { kind: 'mkdir'; path: string }
  | { kind: 'remove'; path: string }
  /** `mayFail`: a command whose failure is expected and harmless (unloading what is not loaded). */
  | { kind: 'run'; command: string; args: string[]; mayFail?: boolean };

const guiDomain = (uid: number) => `gui/${uid}`;
const launchctl = (args: string[], mayFail = false): ServiceStep => ({
  kind: 'run',
  command: 'launchctl',
  args,
  ...(mayFail ? { mayFail } : {}),
});

export function installSteps(plist: Record<string, PlistValue>, paths: ServicePaths, uid: number): ServiceStep[] {
  return [
    { kind: 'mkdir', path: dirname(paths.plist) },
    { kind: 'mkdir', path: paths.logDir },
    { kind: 'write', path: paths.plist, text: toPlist(plist) },
    // A service installed before is replaced: unload it first (fails harmlessly when it was not loaded).
    launchctl(['bootout', `${guiDomain(uid)}/${serviceLabel}`], true),
    launchctl(['bootstrap', guiDomain(uid), paths.plist]),
  ];
}

export function uninstallSteps(paths: ServicePaths, uid: number): ServiceStep[] {
  return [launchctl(['bootout', `${guiDomain(uid)}/${serviceLabel}`], true), { kind: 'remove', path: paths.plist }];
}

export const statusStep = (uid: number): ServiceStep => launchctl(['print', `${guiDomain(uid)}/${serviceLabel}`], true);

export function logsStep(paths: ServicePaths, lines: number, follow: boolean): ServiceStep {
  return {
    kind: 'run',
    command: 'tail',
    args: ['-n', String(lines), ...(follow ? ['-F'] : []), paths.stdout, paths.stderr],
  };
}

/** How a step reads in `--dry-run` output: a shell line. */
export function describeStep(step: ServiceStep): string {
  const quote = (arg: string) => (/^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`);
  switch (step.kind) {
    case 'mkdir':
      return `mkdir -p ${quote(step.path)}`;
    case 'write':
      return `write ${quote(step.path)}`;
    case 'remove':
      return `rm -f ${quote(step.path)}`;
    case 'run':
      return [step.command, ...step.args].map(quote).join(' ');
  }
}

export interface StepResult {
  code: number;
  output: string;
}

/** Runs the steps in order; stops at a command that fails unless it may. Returns the last command's result. */
export async function runSteps(steps: ServiceStep[], inherit = false): Promise<StepResult> {
  let last: StepResult = { code: 0, output: '' };
  for (const step of steps) {
    if (step.kind === 'mkdir') await mkdir(step.path, { recursive: true });
    else if (step.kind === 'write') await writeFile(step.path, step.text, { mode: 0o644 });
    else if (step.kind === 'remove') await rm(step.path, { force: true });
    else {
      last = await runCommand(step.command, step.args, inherit);
      if (last.code !== 0 && !step.mayFail)
        throw new Error(`${describeStep(step)} failed (exit ${last.code}): ${last.output.trim()}`);
    }
  }
  return last;
}

function runCommand(command: string, args: string[], inherit: boolean): Promise<StepResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: inherit ? 'inherit' : ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code: code ?? 1, output }));
  });
}

export interface ServiceStatus {
  loaded: boolean;
  state: string | undefined;
  pid: number | undefined;
  lastExitCode: string | undefined;
}

/** The few lines of `launchctl print gui/<uid>/<label>` an operator needs; `loaded: false` when launchd does not know the label. */
export function parseLaunchctlPrint(code: number, output: string): ServiceStatus {
  const field = (name: string) => output.match(new RegExp(`^\\s*${name} = (.+)$`, 'm'))?.[1]?.trim();
  if (code !== 0) return { loaded: false, state: undefined, pid: undefined, lastExitCode: undefined };
  const pid = field('pid');
  return {
    loaded: true,
    state: field('state'),
    pid: pid === undefined ? undefined : Number(pid),
    lastExitCode: field('last exit code'),
  };
}
