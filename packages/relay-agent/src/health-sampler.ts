import { cpus, freemem, totalmem } from 'node:os';
import type { HeartbeatFrame } from 'relaybox-relay-protocol/frames.ts';

type CpuTimes = { busy: number; total: number };

function cpuTimes(): CpuTimes {
  let busy = 0;
  let total = 0;
  for (const cpu of cpus()) {
    const t = cpu.times;
    busy += t.user + t.nice + t.sys + t.irq;
    total += t.user + t.nice + t.sys + t.irq + t.idle;
  }
  return { busy, total };
}

const minuteMs = 60_000;

/**
 * The machine's health for heartbeats: CPU busy share of all cores since the
 * previous sample (0–100), memory in use, and messages sent in the last minute.
 */
export class HealthSampler {
  private last: CpuTimes = cpuTimes();
  private sentAt: number[] = [];

  recordSent(nowMs = Date.now()): void {
    this.sentAt.push(nowMs);
  }

  sample(queueDepth: number, nowMs = Date.now()): HeartbeatFrame['health'] {
    const now = cpuTimes();
    const busy = now.busy - this.last.busy;
    const total = now.total - this.last.total;
    this.last = now;
    this.sentAt = this.sentAt.filter((t) => nowMs - t < minuteMs);
    const memoryTotalBytes = totalmem();
    return {
      cpuPercent: total > 0 ? Math.round((busy / total) * 1000) / 10 : 0,
      memoryUsedBytes: Math.max(0, memoryTotalBytes - freemem()),
      memoryTotalBytes,
      messagesPerMinute: this.sentAt.length,
      queueDepth,
    };
  }
}
