import type { Logger } from '../log.ts';
import type { ActorHost } from './actor-host.ts';
import type { Envelope } from './envelope.ts';
import type { RedisKeys } from './redis-keys.ts';
import type { ScriptedRedis } from './scripts.ts';
import { shardOf } from './shard.ts';
import type { AskFailure } from './types.ts';

/** A query's envelope on the channel of the worker holding its key's shard. */
export const queryAsk = '~query ';

/** An ask's answer, on the asker's reply channel. */
export interface AskReply {
  askId: string;
  ok: boolean;
  value?: unknown;
  error?: string;
  answer?: AskFailure;
}

/**
 * Queries (`ActorProtocol.queries`) on the Redis transport: a query goes to
 * the worker holding its key's shard, which the shard's lease names, and
 * that worker answers from the key's activated state at once
 * (`ActorHost.query`), not behind the messages waiting in the shard's
 * stream. When no worker holds the shard, none listens on its channel, or
 * the state is not activated there, the query is enqueued as any ask and
 * answered in its turn.
 */
export class ShardQueries {
  constructor(
    private readonly deps: {
      nodeId: string;
      keys: RedisKeys;
      cmd: ScriptedRedis;
      log: Logger;
      /** The shards this worker holds, by stream. */
      owned: ReadonlyMap<string, unknown>;
      host: () => ActorHost;
      enqueue: (env: Envelope) => Promise<void>;
      publish: (channel: string, message: string) => Promise<number>;
      nodeChannel: (node: string) => string;
      /** Settles one of this process's asks. */
      settle: (reply: AskReply) => void;
    },
  ) {}

  async send(env: Envelope): Promise<void> {
    const stream = this.streamOf(env);
    if (this.deps.owned.has(stream)) return this.answer(env);
    const owner = await this.deps.cmd.get(this.deps.keys.shard(env.type, this.shardOf(env)).lease);
    if (owner && (await this.deps.publish(this.deps.nodeChannel(owner), `${queryAsk}${JSON.stringify(env)}`)) > 0)
      return;
    await this.deps.enqueue(env);
  }

  /** A query on this worker's node channel. */
  received(message: string): void {
    let env: Envelope;
    try {
      env = JSON.parse(message.slice(queryAsk.length)) as Envelope;
    } catch (err) {
      this.deps.log.warn({ err }, 'could not read a query');
      return;
    }
    if (!env.replyTo || !this.deps.host().has(env.type)) return;
    this.answer(env).catch((err) =>
      this.deps.log.warn({ err, actor: env.type, actorKey: env.key }, 'could not answer a query; its asker times out'),
    );
  }

  /** A query for a shard this worker holds (or held when it was sent): answered from the activated state, or enqueued to wait its turn. */
  private async answer(env: Envelope): Promise<void> {
    const outcome = this.deps.owned.has(this.streamOf(env)) ? await this.deps.host().query(env) : undefined;
    if (!outcome) return this.deps.enqueue(env);
    const askId = env.replyTo!.askId;
    const reply: AskReply = outcome.ok
      ? { askId, ok: true, value: outcome.value }
      : { askId, ok: false, error: outcome.error, answer: outcome.answer };
    if (env.replyTo!.node === this.deps.nodeId) this.deps.settle(reply);
    else await this.deps.publish(this.deps.keys.replyChannel(env.replyTo!.node), JSON.stringify(reply));
  }

  private shardOf(env: Envelope): number {
    return shardOf(env.key, this.deps.host().shardsOf(env.type));
  }

  private streamOf(env: Envelope): string {
    return this.deps.keys.shard(env.type, this.shardOf(env)).stream;
  }
}
