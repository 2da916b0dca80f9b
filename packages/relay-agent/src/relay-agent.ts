import { join } from 'node:path';
import type { Logger } from './agent-logger.ts';
import { retryableServerErrors } from './server-errors.ts';
import type {
  AckFrame,
  AgentFrame,
  ErrorFrame,
  HeartbeatFrame,
  HelloFrame,
  LookupFrame,
  CheckSentFrame,
  SendFrame,
  ServerFrame,
  StatusFrame,
  WelcomeFrame,
} from 'relaybox-relay-protocol/frames.ts';
import { agentVersion, type AgentConfig } from './agent-config.ts';
import { AttachmentUploader } from './attachment-upload.ts';
import type { ChatDbReader } from './chat-db-reader.ts';
import { HealthSampler } from './health-sampler.ts';
import { ChangeForwarder, InboundForwarder } from './inbound-forwarder.ts';
import { availabilityOf, normalizeHandle, sendsAsSms, type MessageSender } from './message-sender.ts';
import { MessagesWatchdog } from './messages-watchdog.ts';
import { OperatorLog } from './operator-log.ts';
import { OutgoingTracker } from './outgoing-tracker.ts';
import { RelayConnection, type CloseInfo } from './relay-connection.ts';
import type { RelayState, RelayStateStore } from './relay-state.ts';
import { SendWorker } from './send-worker.ts';
import { attemptKey, checkpointsOf, type SendJournal, type SendRecord } from './send-journal.ts';
import { ChatDbError } from './sqlite-file.ts';

export interface RelayAgentDeps {
  config: AgentConfig;
  sender: MessageSender;
  reader: ChatDbReader;
  stateStore: RelayStateStore;
  /** Already loaded. */
  journal: SendJournal;
  logger: Logger;
  systemInfo: HelloFrame['systemInfo'];
}

export type AgentExit = { reason: 'stopped' } | { reason: 'fatal'; message: string };

/** Inbound rows are not read while this much is still queued in the socket. */
const maxBufferedBytes = 1024 * 1024;

/**
 * The relay agent: one connection to the server, one queue of sends into
 * Messages, one poll loop over chat.db. Frames from the server are handled
 * one at a time, in order.
 */
export class RelayAgent {
  private readonly config: AgentConfig;
  private readonly log: Logger;
  private readonly connection: RelayConnection;
  private readonly tracker: OutgoingTracker;
  private readonly worker: SendWorker;
  private readonly health = new HealthSampler();
  private readonly operator: OperatorLog;
  private readonly watchdog: MessagesWatchdog;
  private readonly uploader: AttachmentUploader;
  private state: RelayState | undefined;
  private welcomed = false;
  private forwarder: InboundForwarder | undefined;
  private changes: ChangeForwarder | undefined;
  /** State writes (the change cursor) one after another. */
  private stateSaving: Promise<void> = Promise.resolve();
  /** Per connection: how many of each send attempt's status steps went out on it, by attempt key. */
  private statusesSent = new Map<string, number>();
  private frameChain: Promise<void> = Promise.resolve();
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private summaryTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;
  private lastPollError = '';
  /** A send finished since the last `ready`, so a credit is free. */
  private readyOwed = false;
  private stopped = false;
  private exit!: (exit: AgentExit) => void;
  private readonly exited = new Promise<AgentExit>((done) => (this.exit = done));

  constructor(private readonly deps: RelayAgentDeps) {
    this.config = deps.config;
    this.log = deps.logger;
    this.operator = new OperatorLog(deps.logger);
    this.watchdog = new MessagesWatchdog({
      stuckAfterMs: this.config.messagesStuckMs,
      restartIntervalMs: this.config.messagesRestartIntervalMs,
      restart: () => deps.sender.restart(),
      logger: this.log,
    });
    this.uploader = new AttachmentUploader({
      journalPath: join(deps.stateStore.stateDir, 'uploads.json'),
      serverUrl: this.config.serverUrl,
      credential: () => this.state && { relayId: this.state.relayId, secret: this.state.secret },
      logger: this.log,
    });
    this.tracker = new OutgoingTracker(deps.journal, deps.reader, {
      matchWindowMs: this.config.matchWindowMs,
      trackStatusMs: this.config.trackStatusMs,
    });
    this.worker = new SendWorker(deps.journal, deps.sender, {
      attachmentsDir: this.config.attachmentsDir,
      attachmentCleanupDelayMs: this.config.attachmentCleanupDelayMs,
      logger: this.log,
      mayBegin: () => this.welcomed && this.connection.isOpen,
      onChange: (record) => this.afterChange([record]),
    });
    deps.journal.onStep = (record, step) => {
      this.operator.step(record, step);
      if (step.status === 'sent') this.health.recordSent();
      if (step.status === 'sent' || step.status === 'failed') this.readyOwed = true;
    };
    this.connection = new RelayConnection(
      this.config.serverUrl,
      {
        onOpen: () => this.sayHello(),
        onFrame: (frame) => this.enqueueFrame(frame),
        onClose: (info) => this.onClose(info),
        onReconnectScheduled: (delayMs, attempt) => this.operator.reconnecting(delayMs, attempt),
      },
      {
        reconnectBaseMs: this.config.reconnectBaseMs,
        reconnectCapMs: this.config.reconnectCapMs,
        reconnectStableMs: this.config.reconnectStableMs,
        logger: this.log,
      },
    );
  }

  /** Runs until `stop()` or a fatal refusal by the server. */
  async run(): Promise<AgentExit> {
    this.state = await this.deps.stateStore.load();
    if (!this.state && !this.config.registrationToken) {
      return {
        reason: 'fatal',
        message: `no stored credential in ${this.deps.stateStore.path}; run once with --token <registration token>`,
      };
    }
    if (this.state && this.state.serverUrl !== this.config.serverUrl) {
      this.log.warn(
        { stored: this.state.serverUrl, server: this.config.serverUrl },
        'the stored credential was issued for another server URL',
      );
    }
    await this.tracker.init();
    await this.uploader.load();
    this.connection.start();
    this.worker.wake();
    this.schedulePoll(0);
    if (this.config.summaryIntervalMs > 0) {
      this.summaryTimer = setInterval(() => this.operator.summary(this.snapshot()), this.config.summaryIntervalMs);
    }
    return this.exited;
  }

  async stop(exit: AgentExit = { reason: 'stopped' }): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.summaryTimer);
    this.connection.stop();
    this.endConnection();
    clearTimeout(this.pollTimer);
    await this.polling;
    await this.worker.stop();
    await this.uploader.stop();
    await this.frameChain;
    await this.stateSaving;
    await this.deps.journal.flush();
    this.exit(exit);
  }

  // ------------------------------------------------------------ connection

  private sayHello(): void {
    const hello: HelloFrame = { type: 'hello', name: this.config.name, systemInfo: this.deps.systemInfo, agentVersion };
    if (this.state) hello.credential = { relayId: this.state.relayId, secret: this.state.secret };
    else hello.registrationToken = this.config.registrationToken;
    this.operator.connected(this.config.serverUrl, this.state ? 'credential' : 'registration token');
    this.send(hello);
  }

  private enqueueFrame(frame: ServerFrame): void {
    this.frameChain = this.frameChain
      .then(() => this.onFrame(frame))
      .catch((err: unknown) =>
        this.log.error({ err: (err as Error).message, frame: frame.type }, 'frame handling failed'),
      );
  }

  private async onFrame(frame: ServerFrame): Promise<void> {
    if (this.stopped) return;
    switch (frame.type) {
      case 'welcome':
        return this.onWelcome(frame);
      case 'send':
        return this.onSend(frame);
      case 'ack':
        return this.onAck(frame);
      case 'error':
        return this.onError(frame);
      case 'lookup':
        return this.onLookup(frame);
      case 'checkSent':
        return this.onCheckSent(frame);
    }
  }

  /**
   * A failover check: this Mac is a standby of a line whose primary went
   * offline holding the message. Both Macs share one Apple ID, so a message
   * the primary's Mac sent is in this chat.db too (iCloud), and the simulator's
   * Macs share one chat.db file. Its guid answers "sent"; none answers "not sent".
   */
  private async onCheckSent(frame: CheckSentFrame): Promise<void> {
    const since = Date.parse(frame.since);
    const guid = await this.deps.reader.sentSince(normalizeHandle(frame.to), frame.body, since);
    this.log.info({ event: 'sent-check', found: guid !== undefined }, 'failover check answered');
    this.send({ type: 'sentCheck', checkId: frame.checkId, sent: guid !== undefined, ...(guid ? { guid } : {}) });
  }

  private async onLookup(frame: LookupFrame): Promise<void> {
    this.send({ type: 'availability', lookupId: frame.lookupId, ...(await this.availability(frame.handle)) });
  }

  private availability(to: string) {
    return availabilityOf(this.deps.sender, this.deps.reader, to);
  }

  private async onWelcome(frame: WelcomeFrame): Promise<void> {
    if (frame.credential) {
      const inboundFloor =
        this.state?.inboundFloor ?? (this.config.syncHistory ? 0 : await this.deps.reader.maxRowId());
      this.state = {
        serverUrl: this.config.serverUrl,
        relayId: frame.credential.relayId,
        secret: frame.credential.secret,
        registeredAt: new Date().toISOString(),
        inboundFloor,
        changesCursorMs: this.state?.changesCursorMs ?? Date.now(),
      };
      await this.deps.stateStore.save(this.state);
      this.log.info(
        { event: 'credential-stored', relayId: frame.relayId, path: this.deps.stateStore.path },
        `credential stored in ${this.deps.stateStore.path}`,
      );
    } else if (!this.state) {
      this.log.error(
        'the server accepted the registration token without issuing a credential; the next reconnect will fail',
      );
    }
    const start = Math.max(frame.inboundCursor, this.state?.inboundFloor ?? 0);
    const options = { batch: this.config.inboundBatch, maxUnacked: this.config.maxUnackedInbound };
    const journal = this.deps.journal;
    this.forwarder = new InboundForwarder(start, this.deps.reader, options, (guid) => journal.messageIdOf(guid));
    if (this.state && this.state.changesCursorMs === undefined) {
      // An agent that did not read changes before: edits and unsends from now on, not the history's.
      this.state.changesCursorMs = Date.now();
      await this.deps.stateStore.save(this.state);
    }
    this.changes = this.state
      ? new ChangeForwarder(this.state.changesCursorMs ?? Date.now(), this.deps.reader, options, (ms) =>
          this.saveChangesCursor(ms),
        )
      : undefined;
    this.welcomed = true;
    this.statusesSent = new Map();
    this.operator.online(frame.relayId, frame.credential !== undefined, start);
    this.connection.watchLiveness(frame.heartbeatIntervalMs);
    clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = setInterval(() => this.sendHeartbeat(), frame.heartbeatIntervalMs);
    this.sendHeartbeat();
    this.sendReady();
    for (const record of this.deps.journal.all()) if (record.acked < record.steps.length) this.sendStatuses(record);
    this.schedulePoll(0);
    // Attachments left to upload by a drop or a restart go on now.
    this.uploader.wake();
  }

  private async onSend(frame: SendFrame): Promise<void> {
    const journal = this.deps.journal;
    const known = journal.get(frame.messageId, frame.attempt);
    if (known) {
      // The server did not see this attempt finish: never send it again, report everything known about it again.
      this.operator.sendRepeated(known);
      this.statusesSent.set(attemptKey(known.messageId, known.attempt), 0);
      this.sendStatuses(known);
      return;
    }
    if (frame.fromNumber)
      this.log.debug({ messageId: frame.messageId }, 'fromNumber ignored: Messages sends from its default account');
    const now = Date.now();
    const record: SendRecord = {
      messageId: frame.messageId,
      attempt: frame.attempt,
      to: frame.to,
      body: frame.body ?? '',
      attachmentUrls: frame.attachments ?? [],
      ...((await sendsAsSms(frame, (to) => this.availability(to))) ? { sendAs: 'SMS' as const } : {}),
      phase: 'queued',
      acceptedAtMs: now,
      phaseAtMs: now,
      steps: [],
      acked: 0,
    };
    journal.add(record);
    this.operator.sendAccepted(record, journal.inPhase('queued').length, frame.traceparent);
    const unfinished = journal.unfinishedCount();
    if (unfinished > this.config.capacity)
      this.log.warn({ unfinished, capacity: this.config.capacity }, 'server sent beyond the capacity; queued anyway');
    await journal.flush();
    this.worker.wake();
  }

  private onAck(frame: AckFrame): void {
    if (frame.of === 'inbound') {
      const jobs = frame.cursor !== undefined ? (this.forwarder?.onAck(frame.cursor) ?? []) : [];
      if (jobs.length > 0)
        this.uploader
          .add(jobs)
          .catch((err: Error) => this.log.error({ err: err.message }, 'could not keep the attachments to upload'));
      return;
    }
    if (frame.of === 'change') {
      if (frame.at !== undefined) this.changes?.onAck(frame.at);
      return;
    }
    const record = frame.messageId && frame.attempt ? this.deps.journal.get(frame.messageId, frame.attempt) : undefined;
    if (record) this.deps.journal.markAcked(record);
  }

  private onError(frame: ErrorFrame): void {
    this.log.warn(
      { event: 'server-error', code: frame.code, message: frame.message },
      `the server answered ${frame.code}: ${frame.message}`,
    );
    // Refused before welcome and not worth retrying (bad token, revoked credential): the same hello would fail again.
    if (!this.welcomed && !retryableServerErrors.has(frame.code)) {
      const what = this.state ? 'the stored credential' : 'the registration token';
      const message = `the server refused ${what}: ${frame.code}: ${frame.message}`;
      this.operator.refused(message);
      // Not awaited: stop() waits for the frame chain this handler is part of.
      void this.stop({ reason: 'fatal', message });
    }
  }

  private onClose(info: CloseInfo): void {
    const wasWelcomed = this.welcomed;
    this.endConnection();
    const dropped = this.deps.journal.forgetQueued();
    if (dropped.length > 0) {
      this.log.info(
        { event: 'sends-returned', messages: dropped.length },
        'sends not begun left with the connection: the server gives them again',
      );
      this.deps.journal
        .flush()
        .catch((err: unknown) => this.log.warn({ err: (err as Error).message }, 'could not write the send journal'));
    }
    if (this.stopped) return;
    this.operator.disconnected(info.code, info.reason, wasWelcomed);
    if (info.httpStatus === 401 || info.httpStatus === 403) {
      const message = `the server refused the connection with HTTP ${info.httpStatus}`;
      this.operator.refused(message);
      void this.stop({ reason: 'fatal', message });
    }
  }

  /** Keeps the latest acknowledged change's time in the state file; writes never overlap, a failed one is logged. */
  private saveChangesCursor(ms: number): void {
    const state = this.state;
    if (!state || (state.changesCursorMs ?? 0) >= ms) return;
    state.changesCursorMs = ms;
    this.stateSaving = this.stateSaving
      .then(() => this.deps.stateStore.save(state))
      .catch((err: unknown) => this.log.warn({ err: (err as Error).message }, 'could not store the change cursor'));
  }

  private endConnection(): void {
    this.welcomed = false;
    this.forwarder = undefined;
    this.changes = undefined;
    clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = undefined;
  }

  private send(frame: AgentFrame): boolean {
    return this.connection.send(frame);
  }

  private sendHeartbeat(): void {
    const queueDepth = this.deps.journal.inPhase('queued', 'sending').length;
    const heartbeat: HeartbeatFrame = { type: 'heartbeat', health: this.health.sample(queueDepth) };
    if (this.watchdog.reason) heartbeat.degraded = this.watchdog.reason;
    this.send(heartbeat);
  }

  /** A degraded relay advertises no capacity: the server gives its work to other relays. */
  private sendReady(): void {
    if (this.welcomed) this.send({ type: 'ready', capacity: this.watchdog.degraded ? 0 : this.config.capacity });
  }

  /** Sends the steps of a record not yet sent on this connection, in order. */
  private sendStatuses(record: SendRecord): void {
    if (!this.welcomed) return;
    const key = attemptKey(record.messageId, record.attempt);
    let next = this.statusesSent.get(key) ?? record.acked;
    while (next < record.steps.length) {
      const step = record.steps[next]!;
      const frame: StatusFrame = {
        type: 'status',
        messageId: record.messageId,
        attempt: record.attempt,
        status: step.status,
        at: step.at,
      };
      if (step.error !== undefined) frame.error = step.error;
      if (step.reason !== undefined) frame.reason = step.reason;
      if (record.guid) frame.guid = record.guid;
      if (record.service) frame.service = record.service;
      frame.checkpoints = checkpointsOf(record);
      if (!this.send(frame)) return;
      next += 1;
      this.statusesSent.set(key, next);
    }
  }

  private snapshot() {
    return {
      relayId: this.state?.relayId,
      connected: this.welcomed,
      queued: this.deps.journal.inPhase('queued').length,
      unfinished: this.deps.journal.inPhase('sending', 'handed', 'orphaned').length,
      inboundUnacked: this.forwarder?.waitingForAck ?? 0,
    };
  }

  // ------------------------------------------------------------ chat.db polling

  private afterChange(records: SendRecord[]): void {
    for (const record of records) this.sendStatuses(record);
    if (this.readyOwed) {
      this.readyOwed = false;
      this.sendReady();
    }
  }

  private schedulePoll(delayMs: number): void {
    if (this.stopped || this.polling) return;
    clearTimeout(this.pollTimer);
    this.pollTimer = setTimeout(() => {
      this.polling = this.pollOnce().finally(() => {
        this.polling = undefined;
        this.schedulePoll(this.config.pollMs);
      });
    }, delayMs);
  }

  private async pollOnce(): Promise<void> {
    try {
      this.afterChange(await this.tracker.poll());
      const waiting = this.deps.journal
        .inPhase('handed')
        .filter((r) => r.rowId === undefined)
        .map((r) => r.phaseAtMs);
      if (await this.watchdog.check(waiting, this.deps.journal.outgoingCursor ?? 0)) {
        this.sendReady();
        this.sendHeartbeat();
      }
      const forwarder = this.forwarder;
      if (forwarder && this.welcomed && this.connection.bufferedAmount < maxBufferedBytes) {
        const frames = await forwarder.poll();
        // A drop while reading means these rows belong to the next connection's replay.
        if (this.forwarder === forwarder) {
          for (const frame of frames) if (this.send(frame)) this.operator.inboundForwarded(frame);
        }
      }
      const changes = this.changes;
      if (changes && this.welcomed && this.connection.bufferedAmount < maxBufferedBytes) {
        const frames = await changes.poll();
        if (this.changes === changes)
          for (const frame of frames) if (this.send(frame)) this.operator.changeForwarded(frame);
      }
      await this.deps.journal.flush();
      this.lastPollError = '';
    } catch (err) {
      const message = (err as Error).message;
      if (message !== this.lastPollError) {
        const hint =
          err instanceof ChatDbError && err.accessDenied
            ? 'give the terminal Full Disk Access (System Settings → Privacy & Security)'
            : undefined;
        this.log.error({ err: message, hint }, 'reading chat.db failed');
        this.lastPollError = message;
      }
    }
  }
}
