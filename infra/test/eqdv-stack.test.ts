import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import { App, CfnElement } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { IConstruct } from 'constructs';

import { loadConfig } from '../lib/config';
import { CLOUDTRAIL_API_CALL, EqdvStack, GLUE_TABLE_CHANGE, S3TABLES_COMMIT } from '../lib/eqdv-stack';

// The environment variables and IAM actions both stacks must give the functions.
const contract = JSON.parse(
  fs.readFileSync(path.join(__dirname, '..', '..', 'tests', 'infra', 'contract.json'), 'utf8'),
);

const PARTITION = '${AWS::Partition}';
const REGION = '${AWS::Region}';
const ACCOUNT = '${AWS::AccountId}';

// Dummy cargo-lambda outputs, so that synthesis needs no Rust build. Made when the
// file loads: the describe blocks below synthesize while jest collects the tests.
const assets = fs.mkdtempSync(path.join(os.tmpdir(), 'eqdv-infra-test-'));
for (const bin of ['eqdv-planner', 'eqdv-converter']) {
  fs.mkdirSync(path.join(assets, bin));
  fs.writeFileSync(path.join(assets, bin, 'bootstrap'), `#!/bin/sh\necho ${bin}\n`, { mode: 0o755 });
}
afterAll(() => fs.rmSync(assets, { recursive: true, force: true }));

// An undefined value leaves the key out of the context (its default applies).
function synth(context: Record<string, string | undefined> = {}) {
  const config = loadConfig(
    (key) =>
      ({
        databases: 'sales,cdc_db',
        tableLocations: 'my-lake/warehouse,other-bucket',
        plannerAsset: path.join(assets, 'eqdv-planner'),
        converterAsset: path.join(assets, 'eqdv-converter'),
        ...context,
      })[key],
  );
  const app = new App();
  const stack = new EqdvStack(app, 'Test', { config });
  const template = Template.fromStack(stack);
  const id = (c: IConstruct) => stack.getLogicalId(c.node.defaultChild as CfnElement);
  return { stack, template, id };
}

/** A CloudFormation value as a string: Ref X -> ${X}, GetAtt X.A -> ${X.A}, Join. */
function render(value: unknown): string {
  if (typeof value === 'string') return value;
  const v = value as Record<string, unknown>;
  if (typeof v.Ref === 'string') return `\${${v.Ref}}`;
  if (Array.isArray(v['Fn::GetAtt'])) return `\${${(v['Fn::GetAtt'] as string[]).join('.')}}`;
  if (Array.isArray(v['Fn::Join'])) {
    const [sep, parts] = v['Fn::Join'] as [string, unknown[]];
    return parts.map(render).join(sep);
  }
  throw new Error(`cannot render ${JSON.stringify(value)}`);
}

interface Statement {
  effect: string;
  actions: string[];
  resources: string[];
}

const asList = <T>(x: T | T[]): T[] => (Array.isArray(x) ? x : [x]);

/** Every statement of every policy a role has (its inline policies and attached ones). */
function statementsOf(template: Template, roleId: string): Statement[] {
  const docs: Array<{ Statement: Array<Record<string, unknown>> }> = [];
  const role = template.findResources('AWS::IAM::Role')[roleId];
  expect(role).toBeDefined();
  for (const p of role.Properties.Policies ?? []) docs.push(p.PolicyDocument);
  for (const policy of Object.values(template.findResources('AWS::IAM::Policy'))) {
    const roles = (policy.Properties.Roles ?? []).map(render);
    if (roles.includes(`\${${roleId}}`)) docs.push(policy.Properties.PolicyDocument);
  }
  return docs
    .flatMap((d) => d.Statement)
    .map((s) => ({
      effect: s.Effect as string,
      actions: asList(s.Action as string | string[]).slice().sort(),
      resources: asList(s.Resource).map(render).sort(),
    }));
}

const allow = (actions: string[], resources: string[]): Statement => ({
  effect: 'Allow',
  actions: actions.slice().sort(),
  resources: resources.slice().sort(),
});
const byKey = (s: Statement) => `${s.actions.join()}|${s.resources.join()}`;
const sorted = (ss: Statement[]) => ss.slice().sort((a, b) => byKey(a).localeCompare(byKey(b)));

function glueResources(catalog: string, databases: string[]): string[] {
  const arn = (r: string) => `arn:${PARTITION}:glue:${REGION}:${catalog}:${r}`;
  return [arn('catalog'), ...databases.flatMap((db) => [arn(`database/${db}`), arn(`table/${db}/*`)])];
}
const s3 = (key: string) => `arn:${PARTITION}:s3:::${key}`;

/**
 * No role grants what the catalog's deployment must not: another catalog's IAM kinds
 * (contract.catalogs) but those it lists too, or an action with one of its
 * actionPrefixesNotGranted.
 */
function expectNothingOfOtherCatalogs(template: Template, roleIds: string[], catalog: 'glue' | 's3tables' | 'rest') {
  const own: string[] = contract.catalogs[catalog].iam;
  const kinds = Object.entries(contract.catalogs as Record<string, { iam?: string[] }>)
    .filter(([name, spec]) => name !== catalog && Array.isArray(spec.iam))
    .flatMap(([, spec]) => spec.iam!)
    .filter((k) => !own.includes(k));
  const others = new Set<string>(
    kinds.flatMap((k) => [...(contract.iam.planner[k] ?? []), ...(contract.iam.converter[k] ?? [])]),
  );
  const prefixes: string[] = contract.catalogs[catalog].actionPrefixesNotGranted;
  const granted = roleIds.flatMap((r) => statementsOf(template, r)).flatMap((s) => s.actions);
  expect(granted.filter((a) => others.has(a) || prefixes.some((p) => a.startsWith(p)))).toEqual([]);
}

function functionProps(template: Template, logicalId: string) {
  return template.findResources('AWS::Lambda::Function')[logicalId].Properties;
}

type State = Record<string, any>;

/** Every Task state of an ASL definition, those inside Map and Parallel states too. */
function taskStates(definition: { States: Record<string, State> }): State[] {
  return Object.values(definition.States).flatMap((s) => [
    ...(s.Type === 'Task' ? [s] : []),
    ...[s.ItemProcessor, s.Iterator, ...(s.Branches ?? [])].filter(Boolean).flatMap(taskStates),
  ]);
}

describe('EqdvStack with the default settings', () => {
  const { stack, template, id } = synth();

  test('two Rust functions on provided.al2023 / arm64 with the configured sizes', () => {
    template.resourceCountIs('AWS::Lambda::Function', 2);
    const planner = functionProps(template, id(stack.planner));
    const converter = functionProps(template, id(stack.converter));
    for (const f of [planner, converter]) {
      expect(f.Runtime).toBe('provided.al2023');
      expect(f.Architectures).toEqual(['arm64']);
      expect(f.Handler).toBe('bootstrap');
    }
    expect([planner.Timeout, planner.MemorySize]).toEqual([300, 2048]);
    expect([converter.Timeout, converter.MemorySize]).toEqual([900, 2048]);
    expect(planner.Role).toEqual({ 'Fn::GetAtt': [id(stack.plannerRole), 'Arn'] });
    expect(converter.Role).toEqual({ 'Fn::GetAtt': [id(stack.converterRole), 'Arn'] });
  });

  test('environment variables: exactly the names the Rust binaries read', () => {
    const planner = functionProps(template, id(stack.planner)).Environment.Variables;
    const converter = functionProps(template, id(stack.converter)).Environment.Variables;
    expect(Object.keys(planner).sort()).toEqual([...contract.env.common, ...contract.env.planner].sort());
    expect(Object.keys(converter).sort()).toEqual([...contract.env.common, ...contract.env.converter].sort());
    const common = {
      EQDV_CATALOG: 'glue',
      EQDV_GLUE_CATALOG_ID: '',
      EQDV_S3TABLES_BUCKET_ARN: '',
      // Catalog rest's, unset.
      EQDV_REST_URI: '',
      EQDV_WAREHOUSE: '',
      EQDV_REST_CREDENTIAL_SECRET_ARN: '',
      EQDV_REST_SCOPE: '',
      EQDV_REST_OAUTH2_SERVER_URI: '',
      EQDV_ALLOWED_DATABASES: 'sales,cdc_db',
      EQDV_ALLOWED_TABLES: '',
      EQDV_BRANCH: 'main',
      RUST_LOG: 'info',
      EQDV_METRICS_NAMESPACE: 'eqdv',
    };
    // The converter's engine settings; the planner converts small shards with them too.
    const engine = {
      EQDV_QUEUE_GROUPS: '1',
      EQDV_KEY_MEMORY_MB: '512',
      EQDV_KEY_INDEX: 'auto',
      EQDV_PARALLELISM: '0',
      EQDV_READ_MEMORY_MB: '64',
      EQDV_COMMIT_RETRIES: '',
      EQDV_DEADLINE_MARGIN_SECONDS: '30',
    };
    expect(planner).toEqual({
      ...common,
      EQDV_SHARD_QUEUE_URL: { Ref: id(stack.shardQueue) },
      EQDV_SHARD_TARGET_MB: '256',
      EQDV_SPLIT_STATE_MACHINE_ARN: { Ref: id(stack.splitStateMachine) },
      EQDV_SPLIT_ABOVE_MB: '1024',
      EQDV_MAX_RANGES: '32',
      EQDV_CONVERT_IN_PLANNER_MAX_MB: '256',
      ...engine,
    });
    expect(converter).toEqual({
      ...common,
      ...engine,
      EQDV_DEAD_LETTER_QUEUE_URL: { Ref: id(stack.shardDeadLetterQueue) },
      EQDV_MAX_RECEIVES: '5',
    });
  });

  test('shard queue: FIFO, explicit deduplication, 6x visibility, FIFO DLQ with redrive', () => {
    template.resourceCountIs('AWS::SQS::Queue', 3);
    const queues = template.findResources('AWS::SQS::Queue');
    expect(queues[id(stack.shardQueue)].Properties).toEqual({
      FifoQueue: true,
      ContentBasedDeduplication: false,
      VisibilityTimeout: 5400,
      MessageRetentionPeriod: 345600,
      SqsManagedSseEnabled: true,
      RedrivePolicy: {
        deadLetterTargetArn: { 'Fn::GetAtt': [id(stack.shardDeadLetterQueue), 'Arn'] },
        maxReceiveCount: 5,
      },
    });
    expect(queues[id(stack.shardDeadLetterQueue)].Properties).toEqual({
      FifoQueue: true,
      ContentBasedDeduplication: true,
      MessageRetentionPeriod: 1209600,
      SqsManagedSseEnabled: true,
    });
    expect(queues[id(stack.plannerDeadLetterQueue)].Properties.FifoQueue).toBeUndefined();
  });

  test('converter event source: the shard queue, batch size 1, partial batch failures, max concurrency', () => {
    template.resourceCountIs('AWS::Lambda::EventSourceMapping', 1);
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: { 'Fn::GetAtt': [id(stack.shardQueue), 'Arn'] },
      FunctionName: { Ref: id(stack.converter) },
      BatchSize: 1,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      ScalingConfig: { MaximumConcurrency: 10 },
    });
  });

  test('planner triggers: Glue table changes of the configured databases, and the sweep', () => {
    const rules = Object.values(template.findResources('AWS::Events::Rule'));
    expect(rules).toHaveLength(2);
    const target = [{ Arn: { 'Fn::GetAtt': [id(stack.planner), 'Arn'] }, Id: 'Target0' }];
    const glue = rules.find((r) => r.Properties.EventPattern)!;
    expect(glue.Properties.EventPattern).toEqual({
      source: [contract.catalogs.glue.rule.source],
      'detail-type': [GLUE_TABLE_CHANGE],
      detail: { databaseName: ['sales', 'cdc_db'] },
    });
    expect(GLUE_TABLE_CHANGE).toBe(contract.catalogs.glue.rule.detailType);
    expect(glue.Properties.Targets).toEqual(target);
    const sweep = rules.find((r) => r.Properties.ScheduleExpression)!;
    expect(sweep.Properties.ScheduleExpression).toBe('rate(1 hour)');
    expect(sweep.Properties.Targets).toEqual(target);
    template.resourcePropertiesCountIs(
      'AWS::Lambda::Permission',
      { Principal: 'events.amazonaws.com', FunctionName: { 'Fn::GetAtt': [id(stack.planner), 'Arn'] } },
      2,
    );
  });

  test('failed asynchronous planner invocations go to the planner DLQ', () => {
    template.hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
      FunctionName: { Ref: id(stack.planner) },
      MaximumRetryAttempts: 2,
      DestinationConfig: {
        OnFailure: { Destination: { 'Fn::GetAtt': [id(stack.plannerDeadLetterQueue), 'Arn'] } },
      },
    });
  });

  test('alarm on any shard in the DLQ, without actions when no topic is configured', () => {
    template.resourceCountIs('AWS::CloudWatch::Alarm', 5);
    const alarm = template.findResources('AWS::CloudWatch::Alarm')[id(stack.shardDeadLetterAlarm)];
    expect(alarm.Properties).toEqual({
      AlarmDescription: expect.any(String),
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [
        { Name: 'QueueName', Value: { 'Fn::GetAtt': [id(stack.shardDeadLetterQueue), 'QueueName'] } },
      ],
      Statistic: 'Maximum',
      Period: 300,
      EvaluationPeriods: 1,
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
      TreatMissingData: 'notBreaching',
    });
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/Lambda',
      MetricName: 'Errors',
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: id(stack.converter) } }],
      Statistic: 'Sum',
      Period: 300,
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
    });
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/States',
      MetricName: 'ExecutionsFailed',
      Dimensions: [{ Name: 'StateMachineArn', Value: { Ref: id(stack.splitStateMachine) } }],
      Statistic: 'Sum',
      Period: 300,
      EvaluationPeriods: 1,
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
      TreatMissingData: 'notBreaching',
    });
    for (const alarm of Object.values(template.findResources('AWS::CloudWatch::Alarm'))) {
      expect(alarm.Properties.AlarmActions).toBeUndefined();
    }
  });

  test('planner IAM: exactly these statements', () => {
    const a = contract.iam.planner;
    expect(sorted(statementsOf(template, id(stack.plannerRole)))).toEqual(
      sorted([
        allow(a.logs, [`\${${id(stack.node.findChild('PlannerLogGroup'))}.Arn}`]),
        allow(a.shardQueue, [`\${${id(stack.shardQueue)}.Arn}`]),
        allow(a.plannerDeadLetterQueue, [`\${${id(stack.plannerDeadLetterQueue)}.Arn}`]),
        allow(a.glue, glueResources(ACCOUNT, ['sales', 'cdc_db'])),
        allow(a.s3Read, [s3('my-lake/warehouse/*'), s3('other-bucket/*')]),
        // As the converter's: the planner converts a commit's one small shard itself.
        allow(a.s3Write, [
          s3('my-lake/warehouse/*/metadata/*'),
          s3('my-lake/warehouse/*/data/*'),
          s3('other-bucket/*/metadata/*'),
          s3('other-bucket/*/data/*'),
        ]),
        allow(a.splitStateMachine, [`\${${id(stack.splitStateMachine)}}`]),
        allow(a.splitExecutions, [
          `arn:\${AWS::Partition}:states:\${AWS::Region}:\${AWS::AccountId}:execution:\${${id(stack.splitStateMachine)}.Name}:*`,
        ]),
      ]),
    );
  });

  test('converter IAM: exactly these statements', () => {
    const a = contract.iam.converter;
    expect(sorted(statementsOf(template, id(stack.converterRole)))).toEqual(
      sorted([
        allow(a.logs, [`\${${id(stack.node.findChild('ConverterLogGroup'))}.Arn}`]),
        allow(a.shardQueue, [`\${${id(stack.shardQueue)}.Arn}`]),
        allow(a.shardDeadLetterQueue, [`\${${id(stack.shardDeadLetterQueue)}.Arn}`]),
        allow(a.glue, glueResources(ACCOUNT, ['sales', 'cdc_db'])),
        allow(a.s3Read, [s3('my-lake/warehouse/*'), s3('other-bucket/*')]),
        allow(a.s3Write, [
          s3('my-lake/warehouse/*/metadata/*'),
          s3('my-lake/warehouse/*/data/*'),
          s3('other-bucket/*/metadata/*'),
          s3('other-bucket/*/data/*'),
        ]),
      ]),
    );
  });

  test('IAM: a Glue deployment grants no s3tables or secretsmanager action', () => {
    expectNothingOfOtherCatalogs(template, [id(stack.plannerRole), id(stack.converterRole)], 'glue');
  });

  test('split state machine IAM: assumed by Step Functions, invokes the converter only', () => {
    const role = template.findResources('AWS::IAM::Role')[id(stack.splitStateMachineRole)];
    expect(role.Properties.AssumeRolePolicyDocument.Statement.map((s: State) => s.Principal)).toEqual([
      { Service: 'states.amazonaws.com' },
    ]);
    const converter = `\${${id(stack.converter)}.Arn}`;
    expect(statementsOf(template, id(stack.splitStateMachineRole))).toEqual([
      allow(contract.iam.stateMachine.converter, [converter, `${converter}:*`]),
    ]);
  });

  test('split state machine: standard, its own role, the shared definition, every task the converter', () => {
    template.resourceCountIs('AWS::StepFunctions::StateMachine', 1);
    const props = template.findResources('AWS::StepFunctions::StateMachine')[id(stack.splitStateMachine)].Properties;
    expect(props.StateMachineType).toBe('STANDARD');
    expect(props.RoleArn).toEqual({ 'Fn::GetAtt': [id(stack.splitStateMachineRole), 'Arn'] });
    expect(props.LoggingConfiguration).toBeUndefined();
    // The file template.yaml deploys too (tests/infra/sam_check.py checks its states).
    const file = path.join(__dirname, '..', '..', contract.stateMachine.definition);
    expect(JSON.parse(props.DefinitionString)).toEqual(JSON.parse(fs.readFileSync(file, 'utf8')));
    expect(Object.keys(props.DefinitionSubstitutions).sort()).toEqual([...contract.stateMachine.substitutions].sort());
    expect(props.DefinitionSubstitutions.ConverterFunctionArn).toEqual({ 'Fn::GetAtt': [id(stack.converter), 'Arn'] });
    // What CloudFormation deploys: the definition with the substitutions applied.
    const deployed = (props.DefinitionString as string).replace(/\$\{([^}]*)\}/g, (_match, key: string) =>
      render(props.DefinitionSubstitutions[key]),
    );
    expect(deployed).not.toContain('${ConverterFunctionArn}');
    const tasks = taskStates(JSON.parse(deployed));
    expect(tasks.map((t) => t.Parameters?.task ?? 'range').sort()).toEqual(['cleanup', 'commit', 'range']);
    for (const task of tasks) expect(task.Resource).toBe(`\${${id(stack.converter)}.Arn}`);
  });

  // Glue: the catalog and the configured databases and their tables only.
  const GLUE_RESOURCE =
    /:glue:\$\{AWS::Region\}:(\$\{AWS::AccountId\}|[0-9]{12}):(catalog|database\/(sales|cdc_db)|table\/(sales|cdc_db)\/\*)$/;
  const S3_WRITE_RESOURCE = /^arn:\$\{AWS::Partition\}:s3:::[^*]+\/\*\/(metadata|data)\/\*$/;
  const QUEUE_ARN = /^\$\{[A-Za-z0-9]+\.Arn\}$/;

  test('IAM: no managed policies, no wildcard resources, writes only under metadata/ and data/', () => {
    for (const role of Object.values(template.findResources('AWS::IAM::Role'))) {
      expect(role.Properties.ManagedPolicyArns).toBeUndefined();
    }
    template.resourceCountIs('AWS::IAM::Role', 3);
    const statements = [stack.plannerRole, stack.converterRole, stack.splitStateMachineRole].flatMap((r) =>
      statementsOf(template, id(r)),
    );
    for (const s of statements) {
      expect(s.effect).toBe('Allow');
      for (const action of s.actions) expect(action).not.toContain('*');
      for (const resource of s.resources) {
        expect(resource).not.toBe('*');
        if (action(s, 'glue:')) expect(resource).toMatch(GLUE_RESOURCE);
        if (action(s, 's3:Put') || action(s, 's3:Delete')) expect(resource).toMatch(S3_WRITE_RESOURCE);
        if (action(s, 'sqs:')) expect(resource).toMatch(QUEUE_ARN);
      }
    }
    function action(s: Statement, prefix: string) {
      return s.actions.some((a) => a.startsWith(prefix));
    }
  });

  test('outputs: the same names as template.yaml', () => {
    const outputs = Object.keys(template.toJSON().Outputs).sort();
    expect(outputs).toEqual([...contract.outputs].sort());
  });
});

describe('EqdvStack with custom settings', () => {
  const topic = 'arn:aws:sns:eu-west-1:111122223333:eqdv-alarms';
  const { stack, template, id } = synth({
    databases: 'lake',
    tableLocations: 'lake-bucket/iceberg',
    allowedTables: 'lake.orders,lake.customers',
    glueCatalogId: '210987654321',
    converterTimeout: '120',
    converterBatchSize: '5',
    converterMaxConcurrency: '20',
    maxReceiveCount: '3',
    commitRetries: '8',
    splitAboveMb: '4096',
    maxRanges: '8',
    plannerMemorySize: '512',
    convertInPlannerMaxMb: '0',
    sweepSchedule: 'cron(0 3 * * ? *)',
    alarmTopicArn: topic,
  });

  test('visibility timeout follows the converter timeout; redrive and EQDV_MAX_RECEIVES follow maxReceiveCount', () => {
    const queue = template.findResources('AWS::SQS::Queue')[id(stack.shardQueue)].Properties;
    expect(queue.VisibilityTimeout).toBe(720);
    expect(queue.RedrivePolicy.maxReceiveCount).toBe(3);
    const env = functionProps(template, id(stack.converter)).Environment.Variables;
    expect(env.EQDV_MAX_RECEIVES).toBe('3');
    expect(env.EQDV_COMMIT_RETRIES).toBe('8');
    expect(env.EQDV_GLUE_CATALOG_ID).toBe('210987654321');
    expect(env.EQDV_ALLOWED_TABLES).toBe('lake.orders,lake.customers');
    expect(functionProps(template, id(stack.converter)).Timeout).toBe(120);
  });

  test('the planner splits above splitAboveMb into at most maxRanges', () => {
    const env = functionProps(template, id(stack.planner)).Environment.Variables;
    expect([env.EQDV_SPLIT_ABOVE_MB, env.EQDV_MAX_RANGES]).toEqual(['4096', '8']);
  });

  test('convertInPlannerMaxMb 0 with a smaller planner; the planner converts with the converter settings', () => {
    const planner = functionProps(template, id(stack.planner));
    expect([planner.Environment.Variables.EQDV_CONVERT_IN_PLANNER_MAX_MB, planner.MemorySize]).toEqual(['0', 512]);
    expect(planner.Environment.Variables.EQDV_COMMIT_RETRIES).toBe('8');
  });

  test('event source mapping uses the batch size and concurrency', () => {
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      BatchSize: 5,
      ScalingConfig: { MaximumConcurrency: 20 },
    });
  });

  test('Glue ARNs name the other account catalog', () => {
    for (const role of [stack.converterRole, stack.plannerRole]) {
      const glue = statementsOf(template, id(role)).find((s) => s.actions.includes('glue:UpdateTable'));
      expect(glue?.resources).toEqual(glueResources('210987654321', ['lake']).sort());
    }
  });

  test('the rules filter on the one database and run the custom schedule', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: Match.objectLike({ detail: { databaseName: ['lake'] } }),
    });
    template.hasResourceProperties('AWS::Events::Rule', { ScheduleExpression: 'cron(0 3 * * ? *)' });
  });

  test('every alarm notifies the topic on ALARM and OK', () => {
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm'));
    expect(alarms).toHaveLength(5);
    for (const alarm of alarms) {
      expect(alarm.Properties.AlarmActions).toEqual([topic]);
      expect(alarm.Properties.OKActions).toEqual([topic]);
    }
  });
});

describe('EqdvStack on an S3 Tables table bucket', () => {
  const BUCKET = 'arn:aws:s3tables:eu-west-1:111122223333:bucket/lake';
  // synth's default tableLocations are given here, and ignored; `bare` has none.
  const { stack, template, id } = synth({ catalog: 's3tables', tableBucketArn: BUCKET });
  const bare = synth({ catalog: 's3tables', tableBucketArn: BUCKET, tableLocations: undefined });

  test('environment: the same names, EQDV_CATALOG s3tables and the table bucket', () => {
    const planner = functionProps(template, id(stack.planner)).Environment.Variables;
    const converter = functionProps(template, id(stack.converter)).Environment.Variables;
    expect(Object.keys(planner).sort()).toEqual([...contract.env.common, ...contract.env.planner].sort());
    expect(Object.keys(converter).sort()).toEqual([...contract.env.common, ...contract.env.converter].sort());
    for (const env of [planner, converter]) {
      expect(env).toMatchObject({
        EQDV_CATALOG: 's3tables',
        EQDV_S3TABLES_BUCKET_ARN: BUCKET,
        // The allowed namespaces.
        EQDV_ALLOWED_DATABASES: 'sales,cdc_db',
      });
    }
  });

  test('planner IAM: exactly these statements (the bucket\'s tables, and listing them)', () => {
    const a = contract.iam.planner;
    const expected = sorted([
      allow(a.logs, [`\${${id(stack.node.findChild('PlannerLogGroup'))}.Arn}`]),
      allow(a.shardQueue, [`\${${id(stack.shardQueue)}.Arn}`]),
      allow(a.plannerDeadLetterQueue, [`\${${id(stack.plannerDeadLetterQueue)}.Arn}`]),
      allow(a.s3tablesTables, [`${BUCKET}/table/*`]),
      allow(a.s3tablesBucket, [BUCKET]),
      allow(a.splitStateMachine, [`\${${id(stack.splitStateMachine)}}`]),
      allow(a.splitExecutions, [
        `arn:\${AWS::Partition}:states:\${AWS::Region}:\${AWS::AccountId}:execution:\${${id(stack.splitStateMachine)}.Name}:*`,
      ]),
    ]);
    expect(sorted(statementsOf(template, id(stack.plannerRole)))).toEqual(expected);
    expect(sorted(statementsOf(bare.template, bare.id(bare.stack.plannerRole)))).toEqual(expected);
  });

  test('converter IAM: exactly these statements (the bucket\'s tables)', () => {
    const a = contract.iam.converter;
    const expected = sorted([
      allow(a.logs, [`\${${id(stack.node.findChild('ConverterLogGroup'))}.Arn}`]),
      allow(a.shardQueue, [`\${${id(stack.shardQueue)}.Arn}`]),
      allow(a.shardDeadLetterQueue, [`\${${id(stack.shardDeadLetterQueue)}.Arn}`]),
      allow(a.s3tablesTables, [`${BUCKET}/table/*`]),
    ]);
    expect(sorted(statementsOf(template, id(stack.converterRole)))).toEqual(expected);
    expect(sorted(statementsOf(bare.template, bare.id(bare.stack.converterRole)))).toEqual(expected);
  });

  test('the catalog kinds of contract.json, and no Glue or S3 action, table locations given or not', () => {
    const granted = (t: Template, roleId: string) => new Set(statementsOf(t, roleId).flatMap((s) => s.actions));
    const planner = granted(template, id(stack.plannerRole));
    const converter = granted(template, id(stack.converterRole));
    for (const kind of contract.catalogs.s3tables.iam as string[]) {
      for (const action of contract.iam.planner[kind] ?? []) expect(planner).toContain(action);
      for (const action of contract.iam.converter[kind] ?? []) expect(converter).toContain(action);
    }
    for (const s of [{ stack, template, id }, bare]) {
      expectNothingOfOtherCatalogs(s.template, [s.id(s.stack.plannerRole), s.id(s.stack.converterRole)], 's3tables');
    }
  });

  test('planner triggers: the table bucket\'s commits as CloudTrail records them, and the sweep', () => {
    const rules = Object.values(template.findResources('AWS::Events::Rule'));
    expect(rules).toHaveLength(2);
    const target = [{ Arn: { 'Fn::GetAtt': [id(stack.planner), 'Arn'] }, Id: 'Target0' }];
    const commits = rules.find((r) => r.Properties.EventPattern)!;
    const rule = contract.catalogs.s3tables.rule;
    expect([CLOUDTRAIL_API_CALL, S3TABLES_COMMIT]).toEqual([rule.detailType, rule.eventName]);
    expect(commits.Properties.EventPattern).toEqual({
      source: [rule.source],
      'detail-type': [rule.detailType],
      detail: {
        eventName: [rule.eventName],
        requestParameters: { tableBucketARN: [BUCKET], namespace: ['sales', 'cdc_db'] },
      },
    });
    expect(commits.Properties.Targets).toEqual(target);
    const sweep = rules.find((r) => r.Properties.ScheduleExpression)!;
    expect(sweep.Properties.ScheduleExpression).toBe('rate(1 hour)');
    expect(sweep.Properties.Targets).toEqual(target);
    template.resourcePropertiesCountIs(
      'AWS::Lambda::Permission',
      { Principal: 'events.amazonaws.com', FunctionName: { 'Fn::GetAtt': [id(stack.planner), 'Arn'] } },
      2,
    );
  });

  test('the rest of the stack is the Glue deployment\'s', () => {
    template.resourceCountIs('AWS::Lambda::Function', 2);
    template.resourceCountIs('AWS::SQS::Queue', 3);
    template.resourceCountIs('AWS::StepFunctions::StateMachine', 1);
    template.resourceCountIs('AWS::CloudWatch::Alarm', 5);
    template.resourceCountIs('AWS::IAM::Role', 3);
    expect(Object.keys(template.toJSON().Outputs).sort()).toEqual([...contract.outputs].sort());
  });
});

describe('EqdvStack on an Iceberg REST catalog', () => {
  const REST_URI = 'https://catalog.example.com/api/catalog';
  const SECRET = 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:eqdv/rest-AbC123';
  // Every REST setting and a credential secret, no table locations (a catalog that
  // vends credentials): synth's default tableLocations left out.
  const { stack, template, id } = synth({
    catalog: 'rest',
    restUri: REST_URI,
    restWarehouse: 'lake',
    restCredentialSecretArn: SECRET,
    restScope: 'PRINCIPAL_ROLE:ALL',
    restOAuth2ServerUri: 'https://auth.example.com/oauth/tokens',
    tableLocations: undefined,
  });
  // Only the URI, and synth's default table locations (a catalog that vends none).
  const located = synth({ catalog: 'rest', restUri: REST_URI });
  const PLANNER_COMMON = (s: EqdvStack, i: (c: IConstruct) => string) => [
    allow(contract.iam.planner.logs, [`\${${i(s.node.findChild('PlannerLogGroup'))}.Arn}`]),
    allow(contract.iam.planner.shardQueue, [`\${${i(s.shardQueue)}.Arn}`]),
    allow(contract.iam.planner.plannerDeadLetterQueue, [`\${${i(s.plannerDeadLetterQueue)}.Arn}`]),
    allow(contract.iam.planner.splitStateMachine, [`\${${i(s.splitStateMachine)}}`]),
    allow(contract.iam.planner.splitExecutions, [
      `arn:\${AWS::Partition}:states:\${AWS::Region}:\${AWS::AccountId}:execution:\${${i(s.splitStateMachine)}.Name}:*`,
    ]),
  ];
  const CONVERTER_COMMON = (s: EqdvStack, i: (c: IConstruct) => string) => [
    allow(contract.iam.converter.logs, [`\${${i(s.node.findChild('ConverterLogGroup'))}.Arn}`]),
    allow(contract.iam.converter.shardQueue, [`\${${i(s.shardQueue)}.Arn}`]),
    allow(contract.iam.converter.shardDeadLetterQueue, [`\${${i(s.shardDeadLetterQueue)}.Arn}`]),
  ];
  const LOCATION_READS = [s3('my-lake/warehouse/*'), s3('other-bucket/*')];
  const LOCATION_WRITES = [
    s3('my-lake/warehouse/*/metadata/*'),
    s3('my-lake/warehouse/*/data/*'),
    s3('other-bucket/*/metadata/*'),
    s3('other-bucket/*/data/*'),
  ];

  test('environment: the same names, EQDV_CATALOG rest and the REST settings; the credential as a secret ARN', () => {
    for (const [s, t, i, values] of [
      [
        stack,
        template,
        id,
        {
          EQDV_CATALOG: 'rest',
          EQDV_REST_URI: REST_URI,
          EQDV_WAREHOUSE: 'lake',
          EQDV_REST_CREDENTIAL_SECRET_ARN: SECRET,
          EQDV_REST_SCOPE: 'PRINCIPAL_ROLE:ALL',
          EQDV_REST_OAUTH2_SERVER_URI: 'https://auth.example.com/oauth/tokens',
          EQDV_S3TABLES_BUCKET_ARN: '',
          EQDV_ALLOWED_DATABASES: 'sales,cdc_db',
        },
      ],
      [
        located.stack,
        located.template,
        located.id,
        {
          EQDV_CATALOG: 'rest',
          EQDV_REST_URI: REST_URI,
          EQDV_WAREHOUSE: '',
          EQDV_REST_CREDENTIAL_SECRET_ARN: '',
          EQDV_REST_SCOPE: '',
          EQDV_REST_OAUTH2_SERVER_URI: '',
        },
      ],
    ] as const) {
      const planner = functionProps(t, i(s.planner)).Environment.Variables;
      const converter = functionProps(t, i(s.converter)).Environment.Variables;
      expect(Object.keys(planner).sort()).toEqual([...contract.env.common, ...contract.env.planner].sort());
      expect(Object.keys(converter).sort()).toEqual([...contract.env.common, ...contract.env.converter].sort());
      for (const env of [planner, converter]) {
        expect(env).toMatchObject(values);
        // Never the plain-text credential or token (local runs only).
        expect(env.EQDV_REST_CREDENTIAL).toBeUndefined();
        expect(env.EQDV_REST_TOKEN).toBeUndefined();
      }
    }
  });

  test('planner IAM: exactly these statements (the secret; the locations when given)', () => {
    const a = contract.iam.planner;
    expect(sorted(statementsOf(template, id(stack.plannerRole)))).toEqual(
      sorted([...PLANNER_COMMON(stack, id), allow(a.restCredentialSecret, [SECRET])]),
    );
    expect(sorted(statementsOf(located.template, located.id(located.stack.plannerRole)))).toEqual(
      sorted([
        ...PLANNER_COMMON(located.stack, located.id),
        allow(a.s3Read, LOCATION_READS),
        allow(a.s3Write, LOCATION_WRITES),
      ]),
    );
  });

  test('converter IAM: exactly these statements (the secret; the locations when given)', () => {
    const a = contract.iam.converter;
    expect(sorted(statementsOf(template, id(stack.converterRole)))).toEqual(
      sorted([...CONVERTER_COMMON(stack, id), allow(a.restCredentialSecret, [SECRET])]),
    );
    expect(sorted(statementsOf(located.template, located.id(located.stack.converterRole)))).toEqual(
      sorted([
        ...CONVERTER_COMMON(located.stack, located.id),
        allow(a.s3Read, LOCATION_READS),
        allow(a.s3Write, LOCATION_WRITES),
      ]),
    );
  });

  test('the catalog kinds of contract.json, and no Glue or S3 Tables action', () => {
    expect(contract.catalogs.rest.actionPrefixesNotGranted).toEqual(expect.arrayContaining(['glue:', 's3tables:']));
    const granted = (t: Template, roleId: string) => new Set(statementsOf(t, roleId).flatMap((s) => s.actions));
    for (const [role, kind] of [
      [stack.plannerRole, 'planner'],
      [stack.converterRole, 'converter'],
    ] as const) {
      const actions = granted(template, id(role));
      expect(actions).toContain('secretsmanager:GetSecretValue');
      for (const action of contract.iam[kind].restCredentialSecret) expect(actions).toContain(action);
    }
    for (const s of [{ stack, template, id }, located]) {
      expectNothingOfOtherCatalogs(s.template, [s.id(s.stack.plannerRole), s.id(s.stack.converterRole)], 'rest');
      for (const role of [s.stack.plannerRole, s.stack.converterRole, s.stack.splitStateMachineRole]) {
        for (const st of statementsOf(s.template, s.id(role))) {
          for (const resource of st.resources) expect(resource).not.toBe('*');
        }
      }
    }
  });

  test('planner triggers: the sweep alone (a REST catalog emits no event)', () => {
    expect(contract.catalogs.rest.rule).toBeNull();
    for (const s of [{ stack, template, id }, located]) {
      const rules = Object.values(s.template.findResources('AWS::Events::Rule'));
      expect(rules).toHaveLength(1);
      const [sweep] = rules;
      expect(sweep.Properties.EventPattern).toBeUndefined();
      expect(sweep.Properties.ScheduleExpression).toBe('rate(1 hour)');
      expect(sweep.Properties.Targets).toEqual([
        { Arn: { 'Fn::GetAtt': [s.id(s.stack.planner), 'Arn'] }, Id: 'Target0' },
      ]);
      s.template.resourcePropertiesCountIs(
        'AWS::Lambda::Permission',
        { Principal: 'events.amazonaws.com', FunctionName: { 'Fn::GetAtt': [s.id(s.stack.planner), 'Arn'] } },
        1,
      );
    }
  });

  test('the rest of the stack is the Glue deployment\'s', () => {
    template.resourceCountIs('AWS::Lambda::Function', 2);
    template.resourceCountIs('AWS::SQS::Queue', 3);
    template.resourceCountIs('AWS::StepFunctions::StateMachine', 1);
    template.resourceCountIs('AWS::CloudWatch::Alarm', 5);
    template.resourceCountIs('AWS::IAM::Role', 3);
    expect(Object.keys(template.toJSON().Outputs).sort()).toEqual([...contract.outputs].sort());
  });
});
