import * as fs from 'fs';
import * as path from 'path';

import { Aws, CfnOutput, Duration, RemovalPolicy, Stack, StackProps } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cloudwatchActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as destinations from 'aws-cdk-lib/aws-lambda-destinations';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';

import { EqdvConfig, shardVisibilitySeconds } from './config';

/** The detail-type of Glue's table change events. */
export const GLUE_TABLE_CHANGE = 'Glue Data Catalog Table State Change';
/** The detail-type of the API calls CloudTrail records, as EventBridge delivers them. */
export const CLOUDTRAIL_API_CALL = 'AWS API Call via CloudTrail';
/** The S3 Tables API call that commits a table (moves its metadata pointer). */
export const S3TABLES_COMMIT = 'UpdateTableMetadataLocation';
/** The table actions both functions need with catalog s3tables (a table's storage included). */
export const S3TABLES_TABLE_ACTIONS = [
  's3tables:GetTableMetadataLocation',
  's3tables:UpdateTableMetadataLocation',
  's3tables:GetTableData',
  's3tables:PutTableData',
];

/** The split state machine's definition, shared with ../template.yaml. */
export const SPLIT_DEFINITION = path.join(__dirname, '..', 'statemachine', 'split.asl.json');

export interface EqdvStackProps extends StackProps {
  readonly config: EqdvConfig;
}

/**
 * eqdv's planner and converter Lambdas, the shard queue and its dead-letter queue,
 * the split state machine, their triggers, least-privilege roles and alarms: the same
 * stack as ../template.yaml (SAM), with context values in place of its parameters.
 * The catalog (Glue, an S3 Tables table bucket or an Iceberg REST catalog) decides the
 * catalog and storage statements of the roles and the event rule on the planner (none
 * for a REST catalog, which emits no event: the sweep alone).
 */
export class EqdvStack extends Stack {
  readonly shardQueue: sqs.Queue;
  readonly shardDeadLetterQueue: sqs.Queue;
  readonly plannerDeadLetterQueue: sqs.Queue;
  readonly planner: lambda.Function;
  readonly converter: lambda.Function;
  readonly plannerRole: iam.Role;
  readonly converterRole: iam.Role;
  readonly splitStateMachine: sfn.StateMachine;
  readonly splitStateMachineRole: iam.Role;
  readonly shardDeadLetterAlarm: cloudwatch.Alarm;

  constructor(scope: Construct, id: string, props: EqdvStackProps) {
    super(scope, id, props);
    const c = props.config;

    const glue = c.catalog === 'glue';
    const s3tables = c.catalog === 's3tables';
    const rest = c.catalog === 'rest';
    // The roles' own access to the table locations: with Glue, and with a REST catalog
    // given locations (for tables it vends no credentials for).
    const tableLocationAccess = glue || (rest && c.tableLocations.length > 0);
    // A REST catalog's OAuth2 client credentials, which the functions read at cold start.
    const restSecret = rest && c.restCredentialSecretArn !== '';
    const catalogId = c.glueCatalogId || Aws.ACCOUNT_ID;
    const glueArn = (resource: string) =>
      `arn:${Aws.PARTITION}:glue:${Aws.REGION}:${catalogId}:${resource}`;
    const glueResources = [
      glueArn('catalog'),
      ...c.databases.flatMap((db) => [glueArn(`database/${db}`), glueArn(`table/${db}/*`)]),
    ];
    const s3Arn = (key: string) => `arn:${Aws.PARTITION}:s3:::${key}`;
    const tableReads = c.tableLocations.map((loc) => s3Arn(`${loc}/*`));
    // eqdv writes metadata.json, manifests and manifest lists under <table>/metadata/
    // and Puffin DV files under <table>/data/, and deletes only its own failed
    // attempt's files there.
    const tableWrites = c.tableLocations.flatMap((loc) => [
      s3Arn(`${loc}/*/metadata/*`),
      s3Arn(`${loc}/*/data/*`),
    ]);
    // S3 Tables: a table's ARN is bucket/NAME/table/ID, so every table of the bucket
    // (namespaces are not in it). These actions authorize the tables' storage too;
    // the storage refuses deletes, so none is granted.
    const s3tablesTables = `${c.tableBucketArn}/table/*`;

    // --- Queues ---------------------------------------------------------------------
    this.shardDeadLetterQueue = new sqs.Queue(this, 'ShardDeadLetterQueue', {
      fifo: true,
      // The converter sends poison shards here itself (with a MessageGroupId).
      contentBasedDeduplication: true,
      retentionPeriod: Duration.days(14),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
    });
    this.shardQueue = new sqs.Queue(this, 'ShardQueue', {
      fifo: true,
      // The planner sets MessageDeduplicationId and MessageGroupId.
      contentBasedDeduplication: false,
      visibilityTimeout: Duration.seconds(shardVisibilitySeconds(c)),
      retentionPeriod: Duration.days(4),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      deadLetterQueue: { queue: this.shardDeadLetterQueue, maxReceiveCount: c.maxReceiveCount },
    });
    this.plannerDeadLetterQueue = new sqs.Queue(this, 'PlannerDeadLetterQueue', {
      retentionPeriod: Duration.days(14),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
    });

    // --- Logs -----------------------------------------------------------------------
    const logGroup = (id: string) =>
      new logs.LogGroup(this, id, {
        retention: c.logRetentionDays as logs.RetentionDays,
        removalPolicy: RemovalPolicy.RETAIN,
      });
    const plannerLogs = logGroup('PlannerLogGroup');
    const converterLogs = logGroup('ConverterLogGroup');

    // --- IAM ------------------------------------------------------------------------
    // Explicit roles, no managed policies. The SQS event source and the on-failure
    // destination add their own grants (consume the shard queue, send to the planner
    // DLQ), each on that one queue.
    this.plannerRole = new iam.Role(this, 'PlannerRole', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: 'eqdv planner',
    });
    plannerLogs.grantWrite(this.plannerRole);
    this.shardQueue.grantSendMessages(this.plannerRole);
    // Step Functions on the split state machine: granted once it exists, below.
    // The planner commits and writes like the converter: it converts a commit's one
    // small shard itself (convertInPlannerMaxMb).
    // Catalog rest: no catalog statement (the catalog authorizes its callers itself).
    if (glue) {
      this.plannerRole.addToPolicy(
        new iam.PolicyStatement({
          sid: 'GlueReadAndCommit',
          actions: ['glue:GetDatabase', 'glue:GetTable', 'glue:GetTables', 'glue:UpdateTable'],
          resources: glueResources,
        }),
      );
    }
    if (s3tables) {
      this.plannerRole.addToPolicy(
        new iam.PolicyStatement({
          sid: 'S3TablesReadAndCommit',
          actions: S3TABLES_TABLE_ACTIONS,
          resources: [s3tablesTables],
        }),
      );
      // The sweep lists the bucket's tables.
      this.plannerRole.addToPolicy(
        new iam.PolicyStatement({
          sid: 'S3TablesListTables',
          actions: ['s3tables:ListTables'],
          resources: [c.tableBucketArn],
        }),
      );
    }
    const grantTableAccess = (role: iam.Role) => {
      if (tableLocationAccess) {
        role.addToPolicy(
          new iam.PolicyStatement({ sid: 'ReadTables', actions: ['s3:GetObject'], resources: tableReads }),
        );
        role.addToPolicy(
          new iam.PolicyStatement({
            sid: 'WriteMetadataAndDeleteVectors',
            actions: ['s3:PutObject', 's3:DeleteObject'],
            resources: tableWrites,
          }),
        );
      }
      // Exactly the one secret. One encrypted with a customer managed key also needs
      // kms:Decrypt on that key, which is not granted (docs/deploy.md).
      if (restSecret) {
        role.addToPolicy(
          new iam.PolicyStatement({
            sid: 'RestCredentialSecret',
            actions: ['secretsmanager:GetSecretValue'],
            resources: [c.restCredentialSecretArn],
          }),
        );
      }
    };
    grantTableAccess(this.plannerRole);

    this.converterRole = new iam.Role(this, 'ConverterRole', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: 'eqdv converter',
    });
    converterLogs.grantWrite(this.converterRole);
    this.shardDeadLetterQueue.grantSendMessages(this.converterRole);
    if (glue) {
      this.converterRole.addToPolicy(
        new iam.PolicyStatement({
          sid: 'GlueCommit',
          actions: ['glue:GetTable', 'glue:UpdateTable'],
          resources: glueResources,
        }),
      );
    }
    if (s3tables) {
      this.converterRole.addToPolicy(
        new iam.PolicyStatement({
          sid: 'S3TablesReadAndCommit',
          actions: S3TABLES_TABLE_ACTIONS,
          resources: [s3tablesTables],
        }),
      );
    }
    grantTableAccess(this.converterRole);

    // --- Functions ------------------------------------------------------------------
    const common: Record<string, string> = {
      EQDV_CATALOG: c.catalog,
      EQDV_GLUE_CATALOG_ID: c.glueCatalogId,
      // Empty with glue, which the functions read as unset.
      EQDV_S3TABLES_BUCKET_ARN: c.tableBucketArn,
      // Catalog rest (empty otherwise). The client credentials stay in Secrets Manager.
      EQDV_REST_URI: c.restUri,
      EQDV_WAREHOUSE: c.restWarehouse,
      EQDV_REST_CREDENTIAL_SECRET_ARN: c.restCredentialSecretArn,
      EQDV_REST_SCOPE: c.restScope,
      EQDV_REST_OAUTH2_SERVER_URI: c.restOAuth2ServerUri,
      EQDV_ALLOWED_DATABASES: c.databases.join(','),
      EQDV_ALLOWED_TABLES: c.allowedTables.join(','),
      EQDV_BRANCH: c.branch,
      RUST_LOG: c.logLevel,
      EQDV_METRICS_NAMESPACE: c.metricsNamespace,
    };
    // The engine's settings: the converter's, and the planner's for its own conversions.
    const engine: Record<string, string> = {
      // The queue groups are the key index's parts too: a shard converts one part.
      EQDV_QUEUE_GROUPS: String(c.queueGroups),
      EQDV_KEY_MEMORY_MB: String(c.keyMemoryMb),
      EQDV_KEY_INDEX: String(c.keyIndex),
      EQDV_PARALLELISM: String(c.parallelism),
      EQDV_READ_MEMORY_MB: String(c.readMemoryMb),
      EQDV_COMMIT_RETRIES: c.commitRetries,
      EQDV_DEADLINE_MARGIN_SECONDS: String(c.deadlineMarginSeconds),
    };
    const rust = {
      runtime: lambda.Runtime.PROVIDED_AL2023,
      architecture: lambda.Architecture.ARM_64,
      handler: 'bootstrap',
    };

    this.converter = new lambda.Function(this, 'ConverterFunction', {
      ...rust,
      description: 'eqdv converter (one shard of equality deletes to deletion vectors)',
      code: lambda.Code.fromAsset(c.converterAsset),
      role: this.converterRole,
      timeout: Duration.seconds(c.converterTimeout),
      memorySize: c.converterMemorySize,
      logGroup: converterLogs,
      environment: {
        ...common,
        ...engine,
        EQDV_DEAD_LETTER_QUEUE_URL: this.shardDeadLetterQueue.queueUrl,
        EQDV_MAX_RECEIVES: String(c.maxReceiveCount),
      },
    });
    this.converter.addEventSource(
      new SqsEventSource(this.shardQueue, {
        batchSize: c.converterBatchSize,
        reportBatchItemFailures: true,
        maxConcurrency: c.converterMaxConcurrency,
      }),
    );

    // --- Split state machine --------------------------------------------------------
    // Converts a shard the planner split into data ranges: each range by its own
    // converter invocation, then one fan-in commit (or the cleanup). Every Task invokes
    // the converter directly (Resource ${ConverterFunctionArn}, which CloudFormation
    // substitutes, as in template.yaml). The file goes inline (fromString) rather than
    // as fromFile's S3 asset, so that cfn-lint and the tests see the definition; parsed
    // first, so a malformed file stops the synth. Standard: a split can outlast
    // Express's 5 minutes, and the execution history records what failed (no logging).
    this.splitStateMachineRole = new iam.Role(this, 'SplitStateMachineRole', {
      assumedBy: new iam.ServicePrincipal('states.amazonaws.com'),
      description: 'eqdv split state machine',
    });
    this.splitStateMachineRole.addToPolicy(
      new iam.PolicyStatement({
        sid: 'InvokeConverter',
        actions: ['lambda:InvokeFunction'],
        resources: [this.converter.functionArn, `${this.converter.functionArn}:*`],
      }),
    );
    this.splitStateMachine = new sfn.StateMachine(this, 'SplitStateMachine', {
      stateMachineType: sfn.StateMachineType.STANDARD,
      role: this.splitStateMachineRole,
      definitionBody: sfn.DefinitionBody.fromString(
        JSON.stringify(JSON.parse(fs.readFileSync(SPLIT_DEFINITION, 'utf8'))),
      ),
      definitionSubstitutions: { ConverterFunctionArn: this.converter.functionArn },
    });
    // The planner starts splits, lists the running ones (a split waits for a running
    // one of its partitions) and describes an execution that already has a split's name
    // (running, succeeded or failed decides whether to start it again).
    this.plannerRole.addToPolicy(
      new iam.PolicyStatement({
        sid: 'StartSplits',
        actions: ['states:ListExecutions', 'states:StartExecution'],
        resources: [this.splitStateMachine.stateMachineArn],
      }),
    );
    this.plannerRole.addToPolicy(
      new iam.PolicyStatement({
        sid: 'ReadSplitExecutions',
        actions: ['states:DescribeExecution'],
        resources: [
          `arn:${Aws.PARTITION}:states:${Aws.REGION}:${Aws.ACCOUNT_ID}:execution:${this.splitStateMachine.stateMachineName}:*`,
        ],
      }),
    );

    // The planner starts the split executions: built after the state machine.
    this.planner = new lambda.Function(this, 'PlannerFunction', {
      ...rust,
      description: 'eqdv planner (Glue events or S3 Tables commits, sweeps, backfills to shards)',
      code: lambda.Code.fromAsset(c.plannerAsset),
      role: this.plannerRole,
      timeout: Duration.seconds(c.plannerTimeout),
      memorySize: c.plannerMemorySize,
      logGroup: plannerLogs,
      environment: {
        ...common,
        EQDV_SHARD_QUEUE_URL: this.shardQueue.queueUrl,
        EQDV_SHARD_TARGET_MB: String(c.shardTargetMb),
        EQDV_SPLIT_STATE_MACHINE_ARN: this.splitStateMachine.stateMachineArn,
        EQDV_SPLIT_ABOVE_MB: String(c.splitAboveMb),
        EQDV_MAX_RANGES: String(c.maxRanges),
        EQDV_CONVERT_IN_PLANNER_MAX_MB: String(c.convertInPlannerMaxMb),
        ...engine,
      },
      // EventBridge invokes the planner asynchronously: after two retries a failed
      // event goes to this queue with the error.
      retryAttempts: 2,
      onFailure: new destinations.SqsDestination(this.plannerDeadLetterQueue),
    });

    // --- Triggers -------------------------------------------------------------------
    // The catalog's table changes, and the sweep: each invokes the planner directly. A
    // REST catalog emits no event: the sweep (and backfills) alone.
    if (glue) {
      new events.Rule(this, 'GlueTableChangeRule', {
        description: 'eqdv: Glue table changes in the configured databases',
        eventPattern: {
          source: ['aws.glue'],
          detailType: [GLUE_TABLE_CHANGE],
          detail: { databaseName: c.databases },
        },
        targets: [new targets.LambdaFunction(this.planner)],
      });
    }
    if (s3tables) {
      // S3 Tables emits no table change event: its commits reach EventBridge as the
      // CloudTrail management events a trail records (without one, the sweep alone).
      // CloudTrail's namespace is a string or a list of one; a pattern list matches both.
      new events.Rule(this, 'S3TablesCommitRule', {
        description: "eqdv: S3 Tables commits in the table bucket's allowed namespaces (CloudTrail)",
        eventPattern: {
          source: ['aws.s3tables'],
          detailType: [CLOUDTRAIL_API_CALL],
          detail: {
            eventName: [S3TABLES_COMMIT],
            requestParameters: { tableBucketARN: [c.tableBucketArn], namespace: c.databases },
          },
        },
        targets: [new targets.LambdaFunction(this.planner)],
      });
    }
    new events.Rule(this, 'SweepRule', {
      description: 'eqdv sweep over every allowed table',
      schedule: events.Schedule.expression(c.sweepSchedule),
      targets: [new targets.LambdaFunction(this.planner)],
    });

    // --- Alarms ---------------------------------------------------------------------
    const topic = c.alarmTopicArn
      ? sns.Topic.fromTopicArn(this, 'AlarmTopic', c.alarmTopicArn)
      : undefined;
    const alarm = (id: string, description: string, metric: cloudwatch.IMetric) => {
      const a = new cloudwatch.Alarm(this, id, {
        alarmDescription: description,
        metric,
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
      if (topic) {
        a.addAlarmAction(new cloudwatchActions.SnsAction(topic));
        a.addOkAction(new cloudwatchActions.SnsAction(topic));
      }
      return a;
    };
    const fiveMinutes = Duration.minutes(5);
    this.shardDeadLetterAlarm = alarm(
      'ShardDeadLetterAlarm',
      'eqdv shards in the dead-letter queue (a shard failed every receive or was poison)',
      this.shardDeadLetterQueue.metricApproximateNumberOfMessagesVisible({
        period: fiveMinutes,
        statistic: 'Maximum',
      }),
    );
    alarm(
      'PlannerDeadLetterAlarm',
      'eqdv planner invocations that failed every retry',
      this.plannerDeadLetterQueue.metricApproximateNumberOfMessagesVisible({
        period: fiveMinutes,
        statistic: 'Maximum',
      }),
    );
    alarm(
      'ConverterErrorsAlarm',
      'eqdv converter invocations that errored (crash, timeout, out of memory)',
      this.converter.metricErrors({ period: fiveMinutes, statistic: 'Sum' }),
    );
    alarm(
      'PlannerErrorsAlarm',
      'eqdv planner invocations that errored',
      this.planner.metricErrors({ period: fiveMinutes, statistic: 'Sum' }),
    );
    alarm(
      'SplitExecutionsFailedAlarm',
      'eqdv split executions that failed (a range or the fan-in failed and the split was cleaned up, or the fan-in\'s commit outcome is unknown)',
      this.splitStateMachine.metricFailed({ period: fiveMinutes, statistic: 'Sum' }),
    );

    // --- Outputs --------------------------------------------------------------------
    new CfnOutput(this, 'ShardQueueUrl', { value: this.shardQueue.queueUrl });
    new CfnOutput(this, 'ShardDeadLetterQueueUrl', { value: this.shardDeadLetterQueue.queueUrl });
    new CfnOutput(this, 'PlannerDeadLetterQueueUrl', { value: this.plannerDeadLetterQueue.queueUrl });
    new CfnOutput(this, 'PlannerFunctionName', { value: this.planner.functionName });
    new CfnOutput(this, 'PlannerFunctionArn', { value: this.planner.functionArn });
    new CfnOutput(this, 'ConverterFunctionArn', { value: this.converter.functionArn });
    new CfnOutput(this, 'PlannerLogGroupName', { value: plannerLogs.logGroupName });
    new CfnOutput(this, 'ConverterLogGroupName', { value: converterLogs.logGroupName });
    new CfnOutput(this, 'SplitStateMachineArn', { value: this.splitStateMachine.stateMachineArn });
  }
}
