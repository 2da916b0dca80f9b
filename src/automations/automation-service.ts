import type { WebhookConfig } from '../config.ts';
import { notFound, pointer, validationError } from '../errors.ts';
import { paginate, pageWindow, readListPage, type ListPage, type Page, type PageRequest } from '../http/pagination.ts';
import { newId, nowIso } from '../ids.ts';
import type { Sort } from '../store/collection.ts';
import { parseWebhookUrl, resolveTarget, targetRefusal } from '../webhooks/address-guard.ts';
import type { SecretBox } from '../webhooks/secret-box.ts';
import {
  maxAutomationsPerOrg,
  type AutomationInput,
  type AutomationView,
  type ExecutionView,
} from './automation-schemas.ts';
import {
  orgScope,
  type AutomationCollections,
  type AutomationDoc,
  type ExecutionDoc,
  type StoredAction,
} from './automation-store.ts';
import { checkPatterns, evaluateWithRetry, type Evaluation, type SampleMessage } from './conditions.ts';

/** The execution log's order, on the index over (automationId, createdAt, id). */
const newestFirst: Sort = { createdAt: -1, id: 1 };

/** Executions shown with GET /automations/:id. */
const recentExecutions = 20;

export function automationView(d: AutomationDoc): AutomationView {
  return {
    id: d.id,
    name: d.name,
    trigger: d.trigger,
    logic: d.logic,
    conditions: d.conditions,
    actions: d.actions.map(actionView),
    enabled: d.enabled,
    createdAt: d.createdAt,
    updatedAt: d.updatedAt,
    lastExecutedAt: d.lastExecutedAt,
    executionCount: d.executionCount,
  };
}

function actionView(a: StoredAction): AutomationView['actions'][number] {
  const { apiKeySealed, secretSealed, ...config } = a.config;
  const view: Record<string, unknown> = { ...config };
  if (a.type === 'log_to_crm') view.hasApiKey = apiKeySealed !== undefined;
  if (a.type === 'call_webhook' || a.type === 'log_to_crm') view.hasSecret = secretSealed !== undefined;
  return { type: a.type, config: view };
}

export function executionView(d: ExecutionDoc): ExecutionView {
  return {
    id: d.id,
    automationId: d.automationId,
    messageId: d.messageId,
    trigger: d.trigger,
    matched: d.matched,
    actions: d.actions.map((a) => ({ type: a.type, status: a.status, error: a.error })),
    createdAt: d.createdAt,
  };
}

/** Spec 4.8: an organization's automations, their dry run and their execution log. */
export class AutomationService {
  constructor(private readonly deps: { db: AutomationCollections; box: SecretBox; webhook: WebhookConfig }) {}

  async create(tenantId: string, body: AutomationInput): Promise<AutomationView> {
    const fields = await this.fields(body);
    if ((await this.deps.db.automations.count(orgScope(tenantId), {})) >= maxAutomationsPerOrg) {
      throw validationError('', `an organization has at most ${maxAutomationsPerOrg} automations`);
    }
    const now = nowIso();
    const doc: AutomationDoc = {
      id: newId('aut'),
      tenantId,
      ...fields,
      createdAt: now,
      updatedAt: now,
      lastExecutedAt: null,
      executionCount: 0,
    };
    await this.deps.db.automations.insertOne(orgScope(tenantId), doc);
    return automationView(doc);
  }

  async list(tenantId: string, q: { page: number; limit: number }): Promise<Page<AutomationView>> {
    const { skip, limit } = pageWindow(q.page, q.limit);
    const [docs, total] = await Promise.all([
      this.deps.db.automations.find(orgScope(tenantId), {}, { sort: { createdAt: 1, id: 1 }, skip, limit }),
      this.deps.db.automations.count(orgScope(tenantId), {}),
    ]);
    return paginate(docs.map(automationView), total, q.page, q.limit);
  }

  async get(tenantId: string, id: string): Promise<AutomationView & { executions: ExecutionView[] }> {
    const doc = await this.load(tenantId, id);
    const executions = await this.deps.db.executions.find(
      orgScope(tenantId),
      { automationId: id },
      { sort: newestFirst, limit: recentExecutions },
    );
    return { ...automationView(doc), executions: executions.map(executionView) };
  }

  /** Full replacement: every field not given takes its default (conditions none, logic and, enabled true). */
  async replace(tenantId: string, id: string, body: AutomationInput): Promise<AutomationView> {
    const fields = await this.fields(body);
    const doc = await this.deps.db.automations.updateOne(
      orgScope(tenantId),
      { id },
      { $set: { ...fields, updatedAt: nowIso() } },
    );
    if (!doc) throw notFound('automation');
    return automationView(doc);
  }

  /** Its execution log goes first: a delete cut short leaves the automation, which the retried delete removes. */
  async delete(tenantId: string, id: string): Promise<void> {
    await this.load(tenantId, id);
    await this.deps.db.executions.deleteMany(orgScope(tenantId), { automationId: id });
    if (!(await this.deps.db.automations.deleteOne(orgScope(tenantId), { id }))) throw notFound('automation');
  }

  /** Compare-and-set on the flag read, so two toggles at once flip twice, never once. */
  async toggle(tenantId: string, id: string): Promise<AutomationView> {
    for (;;) {
      const doc = await this.load(tenantId, id);
      const updated = await this.deps.db.automations.updateOne(
        orgScope(tenantId),
        { id, enabled: doc.enabled },
        { $set: { enabled: !doc.enabled, updatedAt: nowIso() } },
      );
      if (updated) return automationView(updated);
    }
  }

  /** The dry run: the evaluation a real run makes, on a sample message; nothing is sent, created or called. */
  async test(tenantId: string, id: string, message: SampleMessage): Promise<Evaluation> {
    return evaluateWithRetry(await this.load(tenantId, id), message);
  }

  async executions(tenantId: string, id: string, q: PageRequest): Promise<ListPage<ExecutionView>> {
    await this.load(tenantId, id);
    const page = await readListPage(this.deps.db.executions, orgScope(tenantId), { automationId: id }, newestFirst, q);
    return { ...page, data: page.data.map(executionView) };
  }

  private async load(tenantId: string, id: string): Promise<AutomationDoc> {
    const doc = await this.deps.db.automations.findOne(orgScope(tenantId), { id });
    if (!doc) throw notFound('automation');
    return doc;
  }

  /** What the schema cannot check: patterns (linear-time engine, length, compiled size) and action URLs (the webhook address guard). */
  private async fields(
    body: AutomationInput,
  ): Promise<Pick<AutomationDoc, 'name' | 'trigger' | 'logic' | 'conditions' | 'actions' | 'enabled'>> {
    const conditions = body.conditions ?? [];
    checkPatterns(conditions, (i) => pointer('conditions', i, 'value'));
    const actions: StoredAction[] = [];
    for (const [i, a] of body.actions.entries()) {
      if (a.type === 'call_webhook' || a.type === 'log_to_crm') {
        await this.checkUrl(a.config.url, pointer('actions', i, 'config', 'url'));
        const config: StoredAction['config'] = { url: a.config.url };
        if (a.config.secret !== undefined) config.secretSealed = this.deps.box.seal(a.config.secret);
        if (a.type === 'log_to_crm' && a.config.apiKey !== undefined)
          config.apiKeySealed = this.deps.box.seal(a.config.apiKey);
        actions.push({ type: a.type, config });
      } else {
        actions.push({ type: a.type, config: { ...a.config } });
      }
    }
    return {
      name: body.name,
      trigger: body.trigger,
      logic: body.logic ?? 'and',
      conditions,
      actions,
      enabled: body.enabled ?? true,
    };
  }

  private async checkUrl(raw: string, path: string): Promise<void> {
    const parsed = parseWebhookUrl(raw);
    if (!parsed.ok) throw validationError(path, parsed.reason);
    const target = await resolveTarget(parsed.url, this.deps.webhook.allowPrivate);
    if (!target.ok) throw validationError(path, targetRefusal(target));
  }
}
