/**
 * The desktop relay agent's command line, `relaybox-relay` (`npm run relay -- ARGS` in this repository):
 * connect, service, doctor and the simulator's commands.
 * Every failure ends in one plain sentence on stderr and an exit code
 * (2: bad arguments, 1: cannot run); never a stack trace. A command line
 * asking for --json gets its failure as JSON on stdout instead, so a script
 * reading the output always reads JSON.
 */
import { hostname } from 'node:os';
import type { AgentConfig } from './agent-config.ts';
import { createAgentLogger } from './agent-logger.ts';
import { AppleScriptSender } from './applescript-sender.ts';
import { ChatDbReader } from './chat-db-reader.ts';
import { parseCli, UsageError, type CliCommand } from './cli-args.ts';
import { usage } from './cli-usage.ts';
import {
  agentBin,
  describeStep,
  inNpxCache,
  installSteps,
  launchAgentPlist,
  logsStep,
  parseLaunchctlPrint,
  runSteps,
  serviceLabel,
  servicePaths,
  statusStep,
  toPlist,
  uninstallSteps,
  type ServiceStep,
} from './launch-agent.ts';
import type { MessageSender } from './message-sender.ts';
import { doctorPassed, formatChecks, runDoctor } from './doctor.ts';
import { RelayAgent } from './relay-agent.ts';
import { RelayStateStore } from './relay-state.ts';
import { SendJournal } from './send-journal.ts';
import {
  SimulatedMessagesApp,
  simulateFailures,
  simulateReaction,
  simulateNoImessage,
  simulateReply,
  simulateEdit,
  simulateUnsend,
  simulateGroupEvent,
  simulateSmsOnly,
  simulateInbound,
  simulateStall,
} from './simulated-messages-app.ts';
import { ChatDbError } from './sqlite-file.ts';
import { readSystemInfo } from './system-info.ts';

/** A failure the user can act on: printed as is, exit code 1. */
class CannotRun extends Error {}

/** A failure as the JSON a `--json` caller reads: `kind` is `usage` (exit 2) or `cannot-run` (exit 1). */
function jsonFailure(kind: 'usage' | 'cannot-run', message: string): string {
  return `${JSON.stringify({ ok: false, error: { kind, message } }, null, 2)}\n`;
}

async function main(argv: string[], json: boolean): Promise<number> {
  let command;
  try {
    command = parseCli(argv);
  } catch (err) {
    if (err instanceof UsageError || (err as Error).name === 'ConfigError') {
      if (json) process.stdout.write(jsonFailure('usage', (err as Error).message));
      else process.stderr.write(`relay: ${(err as Error).message}\n\n${usage}\n`);
      return 2;
    }
    throw err;
  }
  switch (command.kind) {
    case 'help':
      process.stdout.write(`${usage}\n`);
      return 0;
    case 'simulate-inbound': {
      const row = await simulateInbound(command.chatDbPath, {
        from: command.from,
        body: command.body,
        attributedBodyOnly: command.attributedBodyOnly,
        ...(command.groupId ? { groupId: command.groupId } : {}),
        ...(command.attachments.length > 0 ? { attachments: command.attachments } : {}),
      });
      process.stdout.write(`${JSON.stringify(row)}\n`);
      return 0;
    }
    case 'simulate-stall':
      await simulateStall(command.chatDbPath, command.stalled);
      process.stdout.write(
        command.stalled
          ? 'the simulated Messages app writes no rows until it is restarted\n'
          : 'the simulated Messages app writes rows again\n',
      );
      return 0;
    case 'simulate-failures': {
      const { count, error, neverDeliver } = command;
      await simulateFailures(command.chatDbPath, count, { error, neverDeliver });
      process.stdout.write(
        neverDeliver
          ? `the next ${count} simulated sends will be sent and never delivered\n`
          : `the next ${count} simulated sends will fail with error ${error ?? 1}\n`,
      );
      return 0;
    }
    case 'simulate-reaction': {
      const { kind: _kind, chatDbPath, ...reaction } = command;
      const row = await simulateReaction(chatDbPath, reaction);
      process.stdout.write(
        `${reaction.from} ${reaction.removed ? 'removed' : 'added'} a ${reaction.tapback} tapback (row ${row.rowId})\n`,
      );
      return 0;
    }
    case 'simulate-no-imessage':
      await simulateNoImessage(command.chatDbPath, command.to, command.noImessage);
      process.stdout.write(
        command.noImessage
          ? `${command.to} has no iMessage in the simulator: a send over iMessage fails with error 22\n`
          : `${command.to} has iMessage again in the simulator\n`,
      );
      return 0;
    case 'simulate-reply': {
      const { from, body, replyToGuid } = command;
      const row = await simulateReply(command.chatDbPath, { from, body, replyToGuid });
      process.stdout.write(`wrote a reply from ${from} (row ${row.rowId}, guid ${row.guid})\n`);
      return 0;
    }
    case 'simulate-edit':
    case 'simulate-unsend': {
      const found =
        command.kind === 'simulate-edit'
          ? await simulateEdit(command.chatDbPath, { guid: command.guid, body: command.body })
          : await simulateUnsend(command.chatDbPath, command.guid);
      if (!found) {
        process.stderr.write(`no message with guid ${command.guid}\n`);
        return 1;
      }
      process.stdout.write(`${command.kind === 'simulate-edit' ? 'edited' : 'unsent'} ${command.guid}\n`);
      return 0;
    }
    case 'simulate-group': {
      const { kind: _kind, chatDbPath, ...event } = command;
      const row = await simulateGroupEvent(chatDbPath, event);
      process.stdout.write(
        `wrote a ${event.change.replace('_', ' ')} group event in ${event.group} (row ${row.rowId})\n`,
      );
      return 0;
    }
    case 'simulate-sms-only':
      await simulateSmsOnly(command.chatDbPath, command.to, command.smsOnly);
      process.stdout.write(
        command.smsOnly
          ? `${command.to} is reached by SMS only in the simulator\n`
          : `${command.to} is reached by iMessage again in the simulator\n`,
      );
      return 0;
    case 'run':
      return runAgent(command.config);
    case 'service':
      return runService(command);
    case 'doctor': {
      const checks = await runDoctor({
        chatDbPath: command.chatDbPath,
        stateDir: command.stateDir,
        serverUrl: command.serverUrl,
        simulate: command.simulate,
        name: hostname(),
        osascriptPath: process.env.RELAY_OSASCRIPT || '/usr/bin/osascript',
        systemInfo: await readSystemInfo(),
        logHandles: command.logHandles,
      });
      const ok = doctorPassed(checks);
      process.stdout.write(command.json ? `${JSON.stringify({ ok, checks }, null, 2)}\n` : formatChecks(checks));
      return ok ? 0 : 1;
    }
  }
}

async function runService(command: Extract<CliCommand, { kind: 'service' }>): Promise<number> {
  if (!command.dryRun && process.platform !== 'darwin') {
    throw new CannotRun('launchd services exist only on macOS; --dry-run prints what would be done');
  }
  const paths = servicePaths();
  const uid = process.getuid?.() ?? 0;
  let steps: ServiceStep[];
  switch (command.action) {
    case 'install': {
      // A dry run refuses what the real one does: it shows the service that would run, or why none would.
      const state = await new RelayStateStore(command.stateDir).load();
      if (state === undefined) {
        throw new CannotRun(
          `no relay is registered in ${command.stateDir}: run relaybox-relay connect --server ${command.serverUrl ?? 'URL'} --token TOKEN once first`,
        );
      }
      if (inNpxCache(agentBin)) {
        throw new CannotRun(
          `this relaybox-relay runs from npx's cache (${agentBin}), which npm clears: install it with npm install -g and the URL you gave npx, then run relaybox-relay service install`,
        );
      }
      const server = command.serverUrl ?? state.serverUrl;
      const plist = launchAgentPlist(['--server', server, ...command.connectArgs], paths);
      steps = installSteps(plist, paths, uid);
      if (command.dryRun) process.stdout.write(toPlist(plist));
      break;
    }
    case 'uninstall':
      steps = uninstallSteps(paths, uid);
      break;
    case 'status':
      steps = [statusStep(uid)];
      break;
    case 'logs':
      steps = [logsStep(paths, command.lines, command.follow)];
      break;
  }
  if (command.dryRun) {
    process.stdout.write(steps.map((step) => `$ ${describeStep(step)}\n`).join(''));
    return 0;
  }
  const result = await runSteps(steps, command.action === 'logs');
  switch (command.action) {
    case 'install':
      process.stdout.write(
        `installed ${paths.plist} and started ${serviceLabel}; it starts at login and restarts after a crash. Logs: ${paths.logDir}\n`,
      );
      return 0;
    case 'uninstall':
      process.stdout.write(`stopped ${serviceLabel} and removed ${paths.plist}\n`);
      return 0;
    case 'status': {
      const status = parseLaunchctlPrint(result.code, result.output);
      if (!status.loaded) {
        process.stdout.write(`${serviceLabel} is not loaded (relaybox-relay service install loads it)\n`);
        return 3;
      }
      const pid = status.pid === undefined ? '' : `, pid ${status.pid}`;
      process.stdout.write(
        `${serviceLabel}: ${status.state ?? 'unknown'}${pid}, last exit code ${status.lastExitCode ?? 'none'}; logs in ${paths.logDir}\n`,
      );
      return status.state === 'running' ? 0 : 3;
    }
    case 'logs':
      return result.code;
  }
}

async function runAgent(config: AgentConfig): Promise<number> {
  const logger = createAgentLogger(config.logLevel, config.logFormat, process.stdout, {
    logHandles: config.logHandles,
  });
  if (!config.simulate && process.platform !== 'darwin') {
    throw new CannotRun('the Messages app exists only on macOS; on this machine run with --simulate');
  }
  let simulator: SimulatedMessagesApp | undefined;
  let sender: MessageSender;
  if (config.simulate) {
    simulator = await SimulatedMessagesApp.open(config.chatDbPath, {
      deliveryDelayMs: config.simulatorDeliveryMs,
      ...(config.simulatorReadMs !== undefined ? { readDelayMs: config.simulatorReadMs } : {}),
    });
    sender = simulator;
  } else {
    sender = new AppleScriptSender({ osascriptPath: config.osascriptPath, timeoutMs: config.sendTimeoutMs });
  }

  const reader = new ChatDbReader(config.chatDbPath, logger);
  try {
    await reader.maxRowId();
  } catch (err) {
    if (err instanceof ChatDbError && err.accessDenied && !config.simulate) {
      throw new CannotRun(
        `cannot read ${config.chatDbPath}: give your terminal app Full Disk Access (System Settings → Privacy & Security → Full Disk Access), then restart it`,
      );
    }
    throw new CannotRun(`cannot read ${config.chatDbPath}: ${(err as Error).message}`);
  }

  const journal = new SendJournal(config.stateDir, config.journalRetentionMs);
  try {
    await journal.load();
  } catch (err) {
    throw new CannotRun((err as Error).message);
  }
  const agent = new RelayAgent({
    config,
    sender,
    reader,
    journal,
    logger,
    stateStore: new RelayStateStore(config.stateDir),
    systemInfo: await readSystemInfo(),
  });
  const onSignal = (signal: NodeJS.Signals) => {
    logger.info({ event: 'stopping', signal }, `${signal}: stopping`);
    void agent.stop();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  logger.info(
    {
      event: 'starting',
      server: config.serverUrl,
      chatDb: config.chatDbPath,
      simulate: config.simulate,
      stateDir: config.stateDir,
    },
    `relay agent starting: server ${config.serverUrl}, ${config.simulate ? 'simulated Messages on' : 'Messages database'} ${config.chatDbPath}, state in ${config.stateDir}`,
  );
  const exit = await agent.run();
  await simulator?.close();
  await reader.close();
  if (exit.reason === 'fatal') {
    await agent.stop();
    throw new CannotRun(exit.message);
  }
  return 0;
}

const argv = process.argv.slice(2);
const json = argv.includes('--json');
main(argv, json).then(
  (code) => process.exit(code),
  (err: unknown) => {
    const message =
      err instanceof CannotRun || err instanceof ChatDbError
        ? err.message
        : `unexpected error: ${(err as Error)?.message ?? String(err)}`;
    if (json) process.stdout.write(jsonFailure('cannot-run', message));
    else process.stderr.write(`relay: ${message}\n`);
    process.exit(1);
  },
);
