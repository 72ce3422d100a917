"""Translates template.yaml as SAM CLI does and checks the result.

cfn-lint validates the SAM template as written; this checks what it becomes. SAM
CLI's own code expands the Fn::ForEach loops (AWS::LanguageExtensions) with sample
parameter values and runs the SAM translator, offline and without credentials
(`sam validate` does the same, but takes no parameter values, and the template's
loops need them). The resulting CloudFormation is checked against
tests/infra/contract.json, as infra/test/eqdv-stack.test.ts checks the CDK stack:
environment variables, every IAM statement of the three roles, the queues, the event
source mapping, the rules, the split state machine and the alarms. The translator
sees the state machine's local DefinitionUri as a dummy S3 location (SAM CLI puts one
there for validation), so its definition (infra/statemachine/split.asl.json, which
the CDK app inlines) is checked by reading the file.

Usage: python sam_check.py TEMPLATE CONTRACT (run by tests/infra/check in
$EQDV_CACHE/venv-sam). Prints one line per check and 'N passed, N failed'.
"""

import json
import logging
import os
import re
import sys
import traceback

from samcli.lib.translate.sam_template_validator import SamTemplateValidator
from samcli.yamlhelper import yaml_parse

# The translator's metrics (a no-op publisher here) warn when garbage collected.
logging.getLogger("samtranslator.metrics").setLevel(logging.ERROR)

PSEUDO = {"AWS::Region": "eu-west-1", "AWS::AccountId": "111122223333", "AWS::Partition": "aws"}
TOPIC = "arn:aws:sns:eu-west-1:111122223333:eqdv-alarms"


class NoManagedPolicies:
    """The translator asks for managed policy ARNs only if a function names one."""

    def load(self):
        raise AssertionError("the template needs a managed policy lookup (IAM call)")


def translate(template_path, params):
    template = yaml_parse(open(template_path, encoding="utf-8").read())
    validator = SamTemplateValidator(
        template,
        NoManagedPolicies(),
        region=PSEUDO["AWS::Region"],
        parameter_overrides={**PSEUDO, **params},
        language_extensions_enabled=True,
    )
    return yaml_parse(validator.get_translated_template_if_valid())


def render(value):
    """A CloudFormation value as a string: Ref X -> ${X}, GetAtt X.A -> ${X.A}."""
    if isinstance(value, (str, int)):
        return str(value)
    if isinstance(value, dict) and len(value) == 1:
        (fn, arg), = value.items()
        if fn == "Ref":
            return "${%s}" % arg
        if fn == "Fn::GetAtt":
            return "${%s}" % ".".join(arg if isinstance(arg, list) else arg.split("."))
        if fn == "Fn::Join":
            return arg[0].join(render(p) for p in arg[1])
        if fn == "Fn::Sub" and isinstance(arg, str):
            # Its ${X} and ${X.A} read as Ref and GetAtt render.
            return arg
    raise AssertionError(f"cannot render {json.dumps(value)}")


def as_list(x):
    return x if isinstance(x, list) else [x]


def statements_of(resources, role):
    """(actions, resources) of every statement of the role's policies, sorted."""
    assert not resources[role]["Properties"].get("ManagedPolicyArns"), f"{role} has managed policies"
    docs = [p["PolicyDocument"] for p in resources[role]["Properties"].get("Policies", [])]
    for r in resources.values():
        if r["Type"] == "AWS::IAM::RolePolicy" and r["Properties"]["RoleName"] == {"Ref": role}:
            docs.append(r["Properties"]["PolicyDocument"])
        if r["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            assert {"Ref": role} not in r["Properties"].get("Roles", []), f"unexpected policy on {role}"
    out = []
    for doc in docs:
        for s in doc["Statement"]:
            assert s["Effect"] == "Allow" and "NotAction" not in s and "NotResource" not in s, s
            out.append((tuple(sorted(as_list(s["Action"]))), tuple(sorted(render(x) for x in as_list(s["Resource"])))))
    return sorted(out)


def merged(statements):
    """Statements grouped by action set, resources unioned (SAM splits Glue and S3
    access over per-database and per-location policies)."""
    by_actions = {}
    for actions, resources in statements:
        by_actions.setdefault(actions, set()).update(resources)
    return {actions: sorted(resources) for actions, resources in by_actions.items()}


def glue_arns(catalog, databases):
    arn = lambda r: f"arn:aws:glue:eu-west-1:{catalog}:{r}"  # noqa: E731
    return [arn("catalog")] + [a for db in databases for a in (arn(f"database/{db}"), arn(f"table/{db}/*"))]


def s3(key):
    return f"arn:aws:s3:::{key}"


def show(value):
    if isinstance(value, dict):  # statements are keyed by their action tuples
        value = {",".join(k) if isinstance(k, tuple) else k: v for k, v in value.items()}
    return json.dumps(value, sort_keys=True, default=list)


def expect_equal(actual, expected, what):
    if actual != expected:
        raise AssertionError(f"{what}:\n  expected {show(expected)}\n  actual   {show(actual)}")


def of_type(resources, kind):
    return {k: r for k, r in resources.items() if r["Type"] == kind}


def states_of(definition):
    """Every state of an ASL definition, nested ones (Map, Parallel) too, by name."""
    out = {}
    for name, state in definition["States"].items():
        out[name] = state
        for inner in [state.get("ItemProcessor"), state.get("Iterator"), *state.get("Branches", [])]:
            if inner:
                out.update(states_of(inner))
    return out


def catch_target(state, error):
    """The state the first Catch rule that matches `error` leads to (rules apply in
    order), or None."""
    for rule in state.get("Catch", []):
        if error in rule["ErrorEquals"] or "States.ALL" in rule["ErrorEquals"]:
            return rule["Next"]
    return None


def checks(template_path, contract):
    base = {"Databases": "sales,cdc_db", "TableLocations": "my-lake/warehouse,other-bucket"}
    translated = translate(template_path, base)
    default = translated["Resources"]
    custom_params = {
        "Databases": "lake",
        "TableLocations": "lake-bucket/iceberg",
        "AllowedTables": "lake.orders,lake.customers",
        "GlueCatalogId": "210987654321",
        "ConverterTimeout": "120",
        "ConverterBatchSize": "5",
        "ConverterMaxConcurrency": "20",
        "MaxReceiveCount": "3",
        "SplitAboveMb": "4096",
        "MaxRanges": "8",
        "PlannerMemorySize": "512",
        "ConvertInPlannerMaxMb": "0",
        "CommitRetries": "8",
        "AlarmTopicArn": TOPIC,
    }
    custom = translate(template_path, custom_params)["Resources"]

    def functions(resources):
        fns = of_type(resources, "AWS::Lambda::Function")
        expect_equal(sorted(fns), ["ConverterFunction", "PlannerFunction"], "functions")
        return fns["PlannerFunction"]["Properties"], fns["ConverterFunction"]["Properties"]

    def check_functions():
        planner, converter = functions(default)
        for props in (planner, converter):
            expect_equal([props["Runtime"], props["Architectures"], props["Handler"]],
                         ["provided.al2023", ["arm64"], "bootstrap"], "runtime, architectures, handler")
        expect_equal([int(planner["Timeout"]), int(planner["MemorySize"])], [300, 2048], "planner size")
        expect_equal([int(converter["Timeout"]), int(converter["MemorySize"])], [900, 2048], "converter size")
        expect_equal(render(planner["Role"]), "${PlannerRole.Arn}", "planner role")
        expect_equal(render(converter["Role"]), "${ConverterRole.Arn}", "converter role")
        metadata = {k: r["Metadata"]["BuildProperties"]["Binary"] for k, r in
                    of_type(default, "AWS::Lambda::Function").items()}
        expect_equal(metadata, {"PlannerFunction": contract["binaries"]["planner"],
                                "ConverterFunction": contract["binaries"]["converter"]}, "cargo-lambda binaries")

    def check_env():
        planner, converter = functions(default)
        env_p, env_c = planner["Environment"]["Variables"], converter["Environment"]["Variables"]
        expect_equal(sorted(env_p), sorted(contract["env"]["common"] + contract["env"]["planner"]), "planner env")
        expect_equal(sorted(env_c), sorted(contract["env"]["common"] + contract["env"]["converter"]), "converter env")
        expect_equal(render(env_p["EQDV_SHARD_QUEUE_URL"]), "${ShardQueue}", "EQDV_SHARD_QUEUE_URL")
        expect_equal(render(env_c["EQDV_DEAD_LETTER_QUEUE_URL"]), "${ShardDeadLetterQueue}", "EQDV_DEAD_LETTER_QUEUE_URL")
        expect_equal(render(env_p["EQDV_CATALOG"]), "glue", "EQDV_CATALOG")
        expect_equal(render(env_p["EQDV_SPLIT_STATE_MACHINE_ARN"]), "${SplitStateMachine}",
                     "EQDV_SPLIT_STATE_MACHINE_ARN")
        expect_equal([render(env_p["EQDV_SPLIT_ABOVE_MB"]), render(env_p["EQDV_MAX_RANGES"])], ["1024", "32"],
                     "EQDV_SPLIT_ABOVE_MB, EQDV_MAX_RANGES defaults")
        expect_equal(render(env_p["EQDV_CONVERT_IN_PLANNER_MAX_MB"]), "256", "EQDV_CONVERT_IN_PLANNER_MAX_MB default")
        # The planner converts with the converter's engine settings.
        engine = sorted(set(contract["env"]["planner"]) & set(contract["env"]["converter"]))
        expect_equal(engine, sorted(["EQDV_QUEUE_GROUPS", "EQDV_KEY_MEMORY_MB", "EQDV_KEY_INDEX", "EQDV_PARALLELISM", "EQDV_READ_MEMORY_MB",
                                     "EQDV_COMMIT_RETRIES", "EQDV_DEADLINE_MARGIN_SECONDS"]),
                     "the engine variables both functions get")
        expect_equal({k: render(env_p[k]) for k in engine}, {k: render(env_c[k]) for k in engine},
                     "planner engine variables (as the converter's)")
        planner, converter = functions(custom)
        env_p, env_c = planner["Environment"]["Variables"], converter["Environment"]["Variables"]
        expect_equal(render(env_c["EQDV_MAX_RECEIVES"]), "3", "EQDV_MAX_RECEIVES follows MaxReceiveCount")
        expect_equal([render(env_p["EQDV_SPLIT_ABOVE_MB"]), render(env_p["EQDV_MAX_RANGES"])], ["4096", "8"],
                     "EQDV_SPLIT_ABOVE_MB, EQDV_MAX_RANGES follow SplitAboveMb, MaxRanges")
        expect_equal([render(env_p["EQDV_CONVERT_IN_PLANNER_MAX_MB"]), int(planner["MemorySize"])], ["0", 512],
                     "EQDV_CONVERT_IN_PLANNER_MAX_MB, planner memory follow ConvertInPlannerMaxMb, PlannerMemorySize")
        expect_equal([render(env_p["EQDV_COMMIT_RETRIES"]), render(env_c["EQDV_COMMIT_RETRIES"])], ["8", "8"],
                     "EQDV_COMMIT_RETRIES follows CommitRetries in both functions")

    def check_queues():
        for resources, timeout, receives in ((default, 900, 5), (custom, 120, 3)):
            queues = of_type(resources, "AWS::SQS::Queue")
            shard = queues["ShardQueue"]["Properties"]
            expect_equal([shard["FifoQueue"], shard["ContentBasedDeduplication"]], [True, False], "shard queue FIFO")
            expect_equal(int(shard["VisibilityTimeout"]), 6 * timeout, "visibility timeout")
            expect_equal(render(shard["RedrivePolicy"]["deadLetterTargetArn"]), "${ShardDeadLetterQueue.Arn}", "redrive")
            expect_equal(int(shard["RedrivePolicy"]["maxReceiveCount"]), receives, "maxReceiveCount")
            expect_equal(queues["ShardDeadLetterQueue"]["Properties"]["FifoQueue"], True, "shard DLQ FIFO")

    def check_event_source():
        for resources, batch, concurrency in ((default, 1, 10), (custom, 5, 20)):
            (esm,) = of_type(resources, "AWS::Lambda::EventSourceMapping").values()
            p = esm["Properties"]
            expect_equal(render(p["EventSourceArn"]), "${ShardQueue.Arn}", "event source")
            expect_equal(render(p["FunctionName"]), "${ConverterFunction}", "event source target")
            expect_equal([int(p["BatchSize"]), p["FunctionResponseTypes"], int(p["ScalingConfig"]["MaximumConcurrency"])],
                         [batch, ["ReportBatchItemFailures"], concurrency], "batch size, response types, concurrency")

    def check_triggers():
        rules = of_type(default, "AWS::Events::Rule")
        expect_equal(sorted(rules), ["PlannerFunctionGlueTableChange", "PlannerFunctionSweep"], "rules")
        expect_equal(rules["PlannerFunctionGlueTableChange"]["Properties"]["EventPattern"], {
            "source": ["aws.glue"],
            "detail-type": ["Glue Data Catalog Table State Change"],
            "detail": {"databaseName": ["sales", "cdc_db"]},
        }, "Glue event pattern")
        expect_equal(rules["PlannerFunctionSweep"]["Properties"]["ScheduleExpression"], "rate(1 hour)", "schedule")
        for rule in rules.values():
            expect_equal([render(t["Arn"]) for t in rule["Properties"]["Targets"]], ["${PlannerFunction.Arn}"], "rule target")
        (config,) = of_type(default, "AWS::Lambda::EventInvokeConfig").values()
        expect_equal(render(config["Properties"]["DestinationConfig"]["OnFailure"]["Destination"]),
                     "${PlannerDeadLetterQueue.Arn}", "planner on-failure destination")

    def check_alarms():
        alarms = of_type(default, "AWS::CloudWatch::Alarm")
        dlq = alarms["ShardDeadLetterAlarm"]["Properties"]
        expect_equal([dlq["Namespace"], dlq["MetricName"], render(dlq["Dimensions"][0]["Value"]),
                      dlq["Statistic"], int(dlq["Threshold"]), dlq["ComparisonOperator"]],
                     ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "${ShardDeadLetterQueue.QueueName}",
                      "Maximum", 0, "GreaterThanThreshold"], "shard DLQ alarm")
        errors = alarms["ConverterErrorsAlarm"]["Properties"]
        expect_equal([errors["MetricName"], errors["Statistic"], int(errors["Period"])], ["Errors", "Sum", 300],
                     "converter errors alarm")
        split = alarms["SplitExecutionsFailedAlarm"]["Properties"]
        expect_equal([split["Namespace"], split["MetricName"], split["Dimensions"][0]["Name"],
                      render(split["Dimensions"][0]["Value"]), split["Statistic"], int(split["Period"]),
                      int(split["Threshold"]), split["ComparisonOperator"], split["TreatMissingData"]],
                     ["AWS/States", "ExecutionsFailed", "StateMachineArn", "${SplitStateMachine}", "Sum", 300,
                      0, "GreaterThanThreshold", "notBreaching"], "split executions failed alarm")
        for name, alarm in alarms.items():
            assert "AlarmActions" not in alarm["Properties"], f"{name} has actions without a topic"
        for name, alarm in of_type(custom, "AWS::CloudWatch::Alarm").items():
            expect_equal([alarm["Properties"]["AlarmActions"], alarm["Properties"]["OKActions"]], [[TOPIC], [TOPIC]],
                         f"{name} actions")

    def iam(resources, role, catalog, databases, locations, kind):
        a = contract["iam"][kind]
        logs = "${%sLogGroup.Arn}" % ("Planner" if kind == "planner" else "Converter")
        expected = {
            tuple(a["logs"]): [logs],
            tuple(a["glue"]): sorted(glue_arns(catalog, databases)),
            tuple(a["s3Read"]): sorted(s3(f"{loc}/*") for loc in locations),
            # Both convert: the planner a commit's one small shard itself.
            tuple(a["s3Write"]): sorted(s3(f"{loc}/*/{d}/*") for loc in locations for d in ("metadata", "data")),
        }
        if kind == "planner":
            expected[tuple(a["shardQueue"])] = sorted(["${ShardQueue.Arn}", "${PlannerDeadLetterQueue.Arn}"])
            assert a["shardQueue"] == a["plannerDeadLetterQueue"]
            expected[tuple(a["splitStateMachine"])] = ["${SplitStateMachine}"]
            expected[tuple(a["splitExecutions"])] = [
                "arn:aws:states:eu-west-1:111122223333:execution:${SplitStateMachine.Name}:*"]
        else:
            expected[tuple(a["shardQueue"])] = ["${ShardQueue.Arn}"]
            expected[tuple(a["shardDeadLetterQueue"])] = ["${ShardDeadLetterQueue.Arn}"]
        statements = statements_of(resources, role)
        expect_equal(merged(statements), expected, f"{role} statements")
        for actions, arns in statements:
            assert "*" not in arns, f"{role}: a statement on every resource: {actions}"

    def check_planner_iam():
        iam(default, "PlannerRole", "111122223333", ["sales", "cdc_db"], ["my-lake/warehouse", "other-bucket"], "planner")
        iam(custom, "PlannerRole", "210987654321", ["lake"], ["lake-bucket/iceberg"], "planner")

    def check_converter_iam():
        iam(default, "ConverterRole", "111122223333", ["sales", "cdc_db"], ["my-lake/warehouse", "other-bucket"], "converter")
        iam(custom, "ConverterRole", "210987654321", ["lake"], ["lake-bucket/iceberg"], "converter")

    def check_state_machine():
        sm = contract["stateMachine"]
        for resources in (default, custom):
            machines = of_type(resources, "AWS::StepFunctions::StateMachine")
            expect_equal(sorted(machines), ["SplitStateMachine"], "state machines")
            p = machines["SplitStateMachine"]["Properties"]
            expect_equal([p.get("StateMachineType"), render(p["RoleArn"])],
                         ["STANDARD", "${SplitStateMachineRole.Arn}"], "state machine type and role")
            expect_equal({k: render(v) for k, v in p.get("DefinitionSubstitutions", {}).items()},
                         {"ConverterFunctionArn": "${ConverterFunction.Arn}"}, "definition substitutions")
            expect_equal(sorted(p["DefinitionSubstitutions"]), sorted(sm["substitutions"]), "contract substitutions")
            assert "DefinitionS3Location" in p and "DefinitionString" not in p, "definition not from DefinitionUri"
            role = resources["SplitStateMachineRole"]["Properties"]
            expect_equal([s["Principal"] for s in role["AssumeRolePolicyDocument"]["Statement"]],
                         [{"Service": "states.amazonaws.com"}], "state machine role principal")
            statements = statements_of(resources, "SplitStateMachineRole")
            expect_equal(merged(statements), {
                tuple(contract["iam"]["stateMachine"]["converter"]):
                    ["${ConverterFunction.Arn}", "${ConverterFunction.Arn}:*"],
            }, "SplitStateMachineRole statements")
            for actions, arns in statements:
                assert "*" not in arns, f"SplitStateMachineRole: a statement on every resource: {actions}"
        source = yaml_parse(open(template_path, encoding="utf-8").read())
        expect_equal(source["Resources"]["SplitStateMachine"]["Properties"]["DefinitionUri"], sm["definition"],
                     "DefinitionUri")

    def check_split_definition():
        # Relative to the template, as SAM CLI resolves DefinitionUri.
        path = os.path.join(os.path.dirname(os.path.abspath(template_path)), contract["stateMachine"]["definition"])
        text = open(path, encoding="utf-8").read()
        definition = json.loads(text)
        expect_equal(sorted(set(re.findall(r"\$\{([^}]*)\}", text))), sorted(contract["stateMachine"]["substitutions"]),
                     "placeholders in the definition")
        states = states_of(definition)
        tasks = {name: s for name, s in states.items() if s["Type"] == "Task"}
        for name, task in tasks.items():
            expect_equal(task["Resource"], "${ConverterFunctionArn}", f"{name} Resource")
            assert task.get("Retry"), f"{name} has no Retry"
        by_task = {s.get("Parameters", {}).get("task"): name for name, s in tasks.items()}
        assert "cleanup" in by_task and "commit" in by_task, f"no cleanup or commit task: {sorted(tasks)}"
        cleanup, commit = by_task["cleanup"], by_task["commit"]
        maps = [s for s in definition["States"].values() if s["Type"] == "Map"]
        expect_equal(len(maps), 1, "Map states")
        (ranges,) = maps
        expect_equal([s["Resource"] for s in ranges["ItemProcessor"]["States"].values() if s["Type"] == "Task"],
                     ["${ConverterFunctionArn}"], "the Map's task")
        expect_equal(ranges["ItemSelector"]["task"], "range", "the Map's items are range tasks")
        expect_equal([ranges["Next"], catch_target(ranges, "States.TaskFailed")], [commit, cleanup],
                     "the Map: then the commit, on failure the cleanup")
        expect_equal(catch_target(states[commit], "eqdv.RangesStale"), cleanup, "a failed commit: the cleanup")
        unknown = catch_target(states[commit], "eqdv.CommitStateUnknown")
        expect_equal(states[unknown]["Type"], "Fail", "an unknown commit outcome: a Fail state, not the cleanup")
        # The cleanup fails the execution either way (the alarm counts failed executions).
        for target in (states[cleanup].get("Next"), catch_target(states[cleanup], "States.ALL")):
            expect_equal(states[target]["Type"], "Fail", f"after the cleanup: {target}")

    def check_visibility_steps():
        template = yaml_parse(open(template_path, encoding="utf-8").read())
        for timeout in template["Parameters"]["ConverterTimeout"]["AllowedValues"]:
            shard = translate(template_path, {**base, "ConverterTimeout": str(timeout)})["Resources"]["ShardQueue"]
            expect_equal(int(shard["Properties"]["VisibilityTimeout"]), 6 * int(timeout), f"visibility for {timeout}")

    def check_outputs():
        expect_equal(sorted(translated["Outputs"]), sorted(contract["outputs"]), "outputs")

    return [check_outputs, check_functions, check_env, check_queues, check_event_source, check_triggers, check_alarms,
            check_planner_iam, check_converter_iam, check_state_machine, check_split_definition,
            check_visibility_steps]


def main():
    template_path, contract_path = sys.argv[1:3]
    contract = json.load(open(contract_path, encoding="utf-8"))
    try:
        tests = checks(template_path, contract)
    except Exception:  # the translation itself failed
        traceback.print_exc()
        print("0 passed, 1 failed")
        return 1
    failed = 0
    for test in tests:
        name = test.__name__.removeprefix("check_").replace("_", " ")
        try:
            test()
            print(f"  ok   {name}")
        except Exception as e:  # noqa: BLE001 - report every check
            failed += 1
            print(f"  FAIL {name}: {e}")
    print(f"{len(tests) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
