"""Translates template.yaml as SAM CLI does and checks the result.

cfn-lint validates the SAM template as written; this checks what it becomes. SAM
CLI's own code expands the Fn::ForEach loops (AWS::LanguageExtensions) with sample
parameter values and runs the SAM translator, offline and without credentials
(`sam validate` does the same, but takes no parameter values, and the template's
loops need them). The resulting CloudFormation is checked against
tests/infra/contract.json, as infra/test/eqdv-stack.test.ts checks the CDK stack:
environment variables, every IAM statement of the three roles, the queues, the event
source mapping, the rules, the split state machine and the alarms, for a Glue, an
S3 Tables and an Iceberg REST catalog deployment (Catalog; REST with and without a
credential secret and table locations). Resources whose Condition is false are left out, as
CloudFormation would, and the template's Rules and parameter patterns are evaluated
against good and bad parameter values. The translator
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
BUCKET = "arn:aws:s3tables:eu-west-1:111122223333:bucket/lake"
REST_URI = "https://catalog.example.com/api/catalog"
SECRET = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:eqdv/rest-AbC123"


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


def parameter_values(template, params):
    """Every parameter's value as CloudFormation passes it (lists split on commas),
    from the overrides or the defaults; the pseudo parameters too."""
    values = dict(PSEUDO)
    for name, p in template.get("Parameters", {}).items():
        value = params.get(name, p.get("Default"))
        if value is None:
            continue
        value = str(value)
        values[name] = [v.strip() for v in value.split(",")] if p["Type"] == "CommaDelimitedList" else value
    return values


def evaluate(expr, values, conditions=None):
    """The value of a condition or rule expression (the functions those allow)."""
    if not isinstance(expr, dict):
        return expr
    (fn, arg), = expr.items()
    ev = lambda x: evaluate(x, values, conditions)  # noqa: E731
    if fn == "Ref":
        return values[arg]
    if fn == "Condition":
        return evaluate(conditions[arg], values, conditions)
    if fn == "Fn::Equals":
        return ev(arg[0]) == ev(arg[1])
    if fn == "Fn::Not":
        return not ev(arg[0])
    if fn == "Fn::And":
        return all(ev(x) for x in arg)
    if fn == "Fn::Or":
        return any(ev(x) for x in arg)
    if fn == "Fn::Contains":
        return ev(arg[1]) in ev(arg[0])
    if fn == "Fn::EachMemberEquals":
        return all(v == ev(arg[1]) for v in ev(arg[0]))
    if fn == "Fn::EachMemberIn":
        return all(v in ev(arg[1]) for v in ev(arg[0]))
    if fn == "Fn::Join":
        return arg[0].join(as_list(ev(arg[1])))
    raise AssertionError(f"cannot evaluate {json.dumps(expr)}")


def deployed(translated, params):
    """The resources CloudFormation creates: those without a Condition or with a true one."""
    values = parameter_values(translated, params)
    conditions = translated.get("Conditions", {})
    return {k: r for k, r in translated["Resources"].items()
            if "Condition" not in r or evaluate(conditions[r["Condition"]], values, conditions)}


def rule_failures(template, params):
    """What CloudFormation would refuse of these parameter values: the AllowedPattern
    and AllowedValues of each value, and the Rules' assertions (their descriptions)."""
    values = parameter_values(template, params)
    failures = []
    for name, p in template.get("Parameters", {}).items():
        if name not in values:
            failures.append(f"{name} is required")
            continue
        for v in as_list(values[name]):
            if "AllowedPattern" in p and not re.fullmatch(p["AllowedPattern"], v):
                failures.append(f"{name}: {v!r} does not match its pattern")
            if "AllowedValues" in p and v not in [str(a) for a in p["AllowedValues"]]:
                failures.append(f"{name}: {v!r} is not allowed")
    for rule in template.get("Rules", {}).values():
        if "RuleCondition" in rule and not evaluate(rule["RuleCondition"], values):
            continue
        failures += [a["AssertDescription"] for a in rule["Assertions"] if not evaluate(a["Assert"], values)]
    return failures


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


def resolved(value, template, params):
    """A value as CloudFormation deploys it with these parameters, rendered: SAM CLI
    resolves parameter references in resources, but not those SAM's Globals add."""
    values = parameter_values(template, params)

    def go(v):
        if isinstance(v, dict) and len(v) == 1:
            (fn, arg), = v.items()
            if fn == "Ref" and arg in values:
                return values[arg]
            if fn == "Fn::Join":
                parts = go(arg[1])
                return arg[0].join(str(go(p)) for p in as_list(parts))
        return render(v)
    return ",".join(as_list(go(value)))


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
    default = deployed(translated, base)
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
    custom = deployed(translate(template_path, custom_params), custom_params)
    # S3 Tables: TableLocations left at its empty default, and given (it is ignored).
    s3t_params = {"Catalog": "s3tables", "TableBucketArn": BUCKET, "Databases": "sales,cdc_db"}
    s3t_translated = translate(template_path, s3t_params)
    s3t = deployed(s3t_translated, s3t_params)
    s3t_located_params = {**s3t_params, "Databases": "lake", "TableLocations": "my-lake/warehouse"}
    s3t_located = deployed(translate(template_path, s3t_located_params), s3t_located_params)
    # An Iceberg REST catalog: with every REST setting and a credential secret, no table
    # locations (a catalog that vends credentials); and with locations, no secret.
    rest_params = {
        "Catalog": "rest",
        "RestUri": REST_URI,
        "RestWarehouse": "lake",
        "RestCredentialSecretArn": SECRET,
        "RestScope": "PRINCIPAL_ROLE:ALL",
        "RestOAuth2ServerUri": "https://auth.example.com/oauth/tokens",
        "Databases": "sales,cdc_db",
    }
    rest_translated = translate(template_path, rest_params)
    rest = deployed(rest_translated, rest_params)
    rest_located_params = {"Catalog": "rest", "RestUri": REST_URI, "Databases": "lake",
                           "TableLocations": "my-lake/warehouse,other-bucket"}
    rest_located_translated = translate(template_path, rest_located_params)
    rest_located = deployed(rest_located_translated, rest_located_params)
    source = yaml_parse(open(template_path, encoding="utf-8").read())

    def check_catalog_parameters():
        expect_equal(rule_failures(source, base), [], "a Glue deployment's parameters")
        expect_equal(rule_failures(source, s3t_params), [], "an S3 Tables deployment's parameters")
        expect_equal(rule_failures(source, s3t_located_params), [], "S3 Tables with TableLocations (ignored)")
        for arn in (BUCKET, "arn:aws-cn:s3tables:cn-north-1:111122223333:bucket/my-lake-2"):
            expect_equal(rule_failures(source, {**s3t_params, "TableBucketArn": arn}), [], f"TableBucketArn {arn}")
        expect_equal(rule_failures(source, rest_params), [], "a REST deployment's parameters")
        expect_equal(rule_failures(source, rest_located_params), [], "REST with TableLocations, no secret")
        expect_equal(rule_failures(source, {"Catalog": "rest", "RestUri": "https://polaris.internal:8181/api/catalog",
                                            "Databases": "sales"}), [], "REST with only RestUri")
        for arn in (SECRET, "arn:aws-us-gov:secretsmanager:us-gov-west-1:111122223333:secret:team/eqdv_rest.v2-x9Y8z7"):
            expect_equal(rule_failures(source, {**rest_params, "RestCredentialSecretArn": arn}), [],
                         f"RestCredentialSecretArn {arn}")
        refused = [
            ({"Databases": "sales"}, "Catalog=glue needs TableLocations"),
            ({**base, "TableLocations": "my-lake,"}, "Catalog=glue needs TableLocations"),
            ({**base, "TableBucketArn": BUCKET}, "TableBucketArn is for Catalog=s3tables"),
            ({**s3t_params, "TableBucketArn": ""}, "Catalog=s3tables needs TableBucketArn"),
            ({"Catalog": "s3tables", "Databases": "sales"}, "Catalog=s3tables needs TableBucketArn"),
            ({**s3t_params, "TableBucketArn": "arn:aws:s3:::lake"}, "TableBucketArn: 'arn:aws:s3:::lake'"),
            ({**s3t_params, "TableBucketArn": BUCKET + "/table/t"}, "TableBucketArn: "),
            ({**s3t_params, "TableBucketArn": BUCKET.replace("lake", "Lake")}, "TableBucketArn: "),
            ({**s3t_params, "TableBucketArn": BUCKET.replace("111122223333", "*")}, "TableBucketArn: "),
            ({**s3t_params, "Catalog": "hive"}, "Catalog: 'hive' is not allowed"),
            ({"Catalog": "rest", "Databases": "sales"}, "Catalog=rest needs RestUri"),
            ({**rest_params, "RestUri": ""}, "Catalog=rest needs RestUri"),
            ({**rest_params, "RestUri": "http://catalog.example.com"}, "RestUri: 'http://catalog.example.com'"),
            ({**rest_params, "RestUri": "catalog.example.com"}, "RestUri: "),
            ({**rest_params, "RestUri": "https://catalog example"}, "RestUri: "),
            ({**rest_params, "RestOAuth2ServerUri": "http://auth.example.com/token"}, "RestOAuth2ServerUri: "),
            ({**rest_params, "TableBucketArn": BUCKET}, "TableBucketArn is for Catalog=s3tables"),
            ({**rest_located_params, "TableLocations": "my-lake,"}, "with Catalog=rest, TableLocations is empty"),
            # A partial ARN (no 6-character suffix) would be granted and never match.
            ({**rest_params, "RestCredentialSecretArn": "arn:aws:secretsmanager:eu-west-1:111122223333:secret:eqdv"},
             "RestCredentialSecretArn: "),
            ({**rest_params, "RestCredentialSecretArn": SECRET.replace("secretsmanager", "ssm")},
             "RestCredentialSecretArn: "),
            ({**rest_params, "RestCredentialSecretArn": SECRET.replace("111122223333", "*")},
             "RestCredentialSecretArn: "),
            ({**rest_params, "RestCredentialSecretArn": "eqdv/rest"}, "RestCredentialSecretArn: "),
            ({**rest_params, "RestCredentialSecretArn": ""}, "RestScope and RestOAuth2ServerUri are for"),
            ({**base, "RestUri": REST_URI}, "RestUri, RestWarehouse, RestCredentialSecretArn"),
            ({**base, "RestWarehouse": "lake"}, "RestUri, RestWarehouse, RestCredentialSecretArn"),
            ({**s3t_params, "RestCredentialSecretArn": SECRET}, "RestUri, RestWarehouse, RestCredentialSecretArn"),
            ({**s3t_params, "RestScope": "catalog"}, "RestUri, RestWarehouse, RestCredentialSecretArn"),
        ]
        for params, expected in refused:
            failures = rule_failures(source, params)
            assert any(f.startswith(expected) for f in failures), \
                f"{show(params)}: expected a failure starting {expected!r}, got {failures}"

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
        rest_vars = ("EQDV_REST_URI", "EQDV_WAREHOUSE", "EQDV_REST_CREDENTIAL_SECRET_ARN", "EQDV_REST_SCOPE",
                     "EQDV_REST_OAUTH2_SERVER_URI")
        catalog = {k: [resolved(env[k], translated, base) for env in (env_p, env_c)]
                   for k in ("EQDV_CATALOG", "EQDV_S3TABLES_BUCKET_ARN", *rest_vars)}
        expect_equal(catalog, {"EQDV_CATALOG": ["glue", "glue"], "EQDV_S3TABLES_BUCKET_ARN": ["", ""],
                               **{k: ["", ""] for k in rest_vars}},
                     "the catalog variables with Glue (the defaults)")
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
        planner, converter = functions(s3t)
        for name, env, group in (("planner", planner["Environment"]["Variables"], "planner"),
                                 ("converter", converter["Environment"]["Variables"], "converter")):
            expect_equal(sorted(env), sorted(contract["env"]["common"] + contract["env"][group]),
                         f"{name} env with S3 Tables")
            expect_equal({k: resolved(env[k], s3t_translated, s3t_params)
                          for k in ("EQDV_CATALOG", "EQDV_S3TABLES_BUCKET_ARN", "EQDV_ALLOWED_DATABASES")},
                         {"EQDV_CATALOG": "s3tables", "EQDV_S3TABLES_BUCKET_ARN": BUCKET,
                          "EQDV_ALLOWED_DATABASES": "sales,cdc_db"}, f"{name} catalog variables with S3 Tables")
            expect_equal({k: resolved(env[k], s3t_translated, s3t_params) for k in rest_vars},
                         {k: "" for k in rest_vars}, f"{name} REST variables with S3 Tables (unset)")
        # REST: the settings as given (empty ones unset), the credential as a secret's
        # ARN only, never the plain-text EQDV_REST_CREDENTIAL or EQDV_REST_TOKEN.
        for resources, t, params, values in (
            (rest, rest_translated, rest_params, {
                "EQDV_CATALOG": "rest", "EQDV_REST_URI": REST_URI, "EQDV_WAREHOUSE": "lake",
                "EQDV_REST_CREDENTIAL_SECRET_ARN": SECRET, "EQDV_REST_SCOPE": "PRINCIPAL_ROLE:ALL",
                "EQDV_REST_OAUTH2_SERVER_URI": "https://auth.example.com/oauth/tokens",
                "EQDV_S3TABLES_BUCKET_ARN": "", "EQDV_ALLOWED_DATABASES": "sales,cdc_db"}),
            (rest_located, rest_located_translated, rest_located_params, {
                "EQDV_CATALOG": "rest", "EQDV_REST_URI": REST_URI, "EQDV_WAREHOUSE": "",
                "EQDV_REST_CREDENTIAL_SECRET_ARN": "", "EQDV_REST_SCOPE": "", "EQDV_REST_OAUTH2_SERVER_URI": "",
                "EQDV_S3TABLES_BUCKET_ARN": "", "EQDV_ALLOWED_DATABASES": "lake"}),
        ):
            planner, converter = functions(resources)
            for name, env, group in (("planner", planner["Environment"]["Variables"], "planner"),
                                     ("converter", converter["Environment"]["Variables"], "converter")):
                expect_equal(sorted(env), sorted(contract["env"]["common"] + contract["env"][group]),
                             f"{name} env with REST")
                expect_equal({k: resolved(env[k], t, params) for k in values}, values,
                             f"{name} catalog variables with REST ({params['Databases']})")
                for plain in ("EQDV_REST_CREDENTIAL", "EQDV_REST_TOKEN"):
                    assert plain not in env, f"{name} gets {plain}: the credential belongs in the secret"

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

    def planner_rules(resources, table_rule):
        """The rules: the catalog's (if any) and the sweep, each invoking the planner directly."""
        rules = of_type(resources, "AWS::Events::Rule")
        expect_equal(sorted(rules), sorted([r for r in (table_rule, "PlannerFunctionSweep") if r]), "rules")
        expect_equal(rules["PlannerFunctionSweep"]["Properties"]["ScheduleExpression"], "rate(1 hour)", "schedule")
        for rule in rules.values():
            expect_equal([render(t["Arn"]) for t in rule["Properties"]["Targets"]], ["${PlannerFunction.Arn}"], "rule target")
        permissions = of_type(resources, "AWS::Lambda::Permission").values()
        expect_equal(sorted((render(p["Properties"]["FunctionName"]), p["Properties"]["Principal"],
                             p["Properties"]["Action"], render(p["Properties"]["SourceArn"])) for p in permissions),
                     sorted(("${PlannerFunction}", "events.amazonaws.com", "lambda:InvokeFunction", "${%s.Arn}" % r)
                            for r in rules), "EventBridge may invoke the planner, one permission per rule")
        return rules[table_rule]["Properties"]["EventPattern"] if table_rule else None

    def check_triggers():
        glue = contract["catalogs"]["glue"]["rule"]
        expect_equal(planner_rules(default, "PlannerFunctionGlueTableChange"), {
            "source": [glue["source"]],
            "detail-type": [glue["detailType"]],
            "detail": {"databaseName": ["sales", "cdc_db"]},
        }, "Glue event pattern")
        expect_equal(planner_rules(custom, "PlannerFunctionGlueTableChange")["detail"], {"databaseName": ["lake"]},
                     "Glue event pattern's databases")
        s3tables = contract["catalogs"]["s3tables"]["rule"]
        expect_equal(planner_rules(s3t, "PlannerFunctionS3TablesCommit"), {
            "source": [s3tables["source"]],
            "detail-type": [s3tables["detailType"]],
            "detail": {
                "eventName": [s3tables["eventName"]],
                "requestParameters": {"tableBucketARN": [BUCKET], "namespace": ["sales", "cdc_db"]},
            },
        }, "S3 Tables commit pattern (CloudTrail)")
        # A REST catalog emits no event: the sweep alone, with or without locations.
        expect_equal(contract["catalogs"]["rest"]["rule"], None, "the contract's REST rule")
        for resources in (rest, rest_located):
            planner_rules(resources, None)
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

    def iam(resources, role, kind, catalog, glue_catalog="", databases=(), locations=(), secret=None):
        a = contract["iam"][kind]
        logs = "${%sLogGroup.Arn}" % ("Planner" if kind == "planner" else "Converter")
        arns = {
            "glue": lambda: sorted(glue_arns(glue_catalog, databases)),
            "s3Read": lambda: sorted(s3(f"{loc}/*") for loc in locations),
            # Both convert: the planner a commit's one small shard itself.
            "s3Write": lambda: sorted(s3(f"{loc}/*/{d}/*") for loc in locations for d in ("metadata", "data")),
            # A table's ARN is bucket/NAME/table/ID: every table of the bucket.
            "s3tablesTables": lambda: [f"{BUCKET}/table/*"],
            "s3tablesBucket": lambda: [BUCKET],
            # Exactly the one secret, when given.
            "restCredentialSecret": lambda: [secret] if secret else [],
        }
        expected = {tuple(a["logs"]): [logs]}
        spec = contract["catalogs"][catalog]
        for k in spec["iam"]:
            if k in a:  # the kinds this principal has
                expected[tuple(a[k])] = arns[k]()
                if not expected[tuple(a[k])]:  # an optional kind whose setting is not given
                    assert k in spec.get("optionalIam", {}), f"{catalog}: {k} has no resources"
                    del expected[tuple(a[k])]
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
        expect_equal(merged(statements), expected, f"{role} statements ({catalog})")
        for actions, arns in statements:
            assert "*" not in arns, f"{role}: a statement on every resource: {actions}"
        # Nothing of the other catalogs (but the kinds this one lists too).
        own = {x for k in spec["iam"] for x in a.get(k, [])}
        others = {x for c, other in contract["catalogs"].items() if c not in ("_comment", catalog)
                  for k in other["iam"] for x in a.get(k, [])} - own
        prefixes = tuple(spec["actionPrefixesNotGranted"])
        granted = {x for actions, _ in statements for x in actions}
        expect_equal(sorted(x for x in granted if x in others or x.startswith(prefixes)), [],
                     f"{role}: actions a {catalog} deployment does not grant")

    def check_planner_iam():
        iam(default, "PlannerRole", "planner", "glue", "111122223333", ["sales", "cdc_db"],
            ["my-lake/warehouse", "other-bucket"])
        iam(custom, "PlannerRole", "planner", "glue", "210987654321", ["lake"], ["lake-bucket/iceberg"])
        iam(s3t, "PlannerRole", "planner", "s3tables")
        iam(s3t_located, "PlannerRole", "planner", "s3tables")
        iam(rest, "PlannerRole", "planner", "rest", secret=SECRET)
        iam(rest_located, "PlannerRole", "planner", "rest", locations=["my-lake/warehouse", "other-bucket"])

    def check_converter_iam():
        iam(default, "ConverterRole", "converter", "glue", "111122223333", ["sales", "cdc_db"],
            ["my-lake/warehouse", "other-bucket"])
        iam(custom, "ConverterRole", "converter", "glue", "210987654321", ["lake"], ["lake-bucket/iceberg"])
        iam(s3t, "ConverterRole", "converter", "s3tables")
        iam(s3t_located, "ConverterRole", "converter", "s3tables")
        iam(rest, "ConverterRole", "converter", "rest", secret=SECRET)
        iam(rest_located, "ConverterRole", "converter", "rest", locations=["my-lake/warehouse", "other-bucket"])

    def check_state_machine():
        sm = contract["stateMachine"]
        for resources in (default, custom, s3t, rest):
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

    return [check_outputs, check_catalog_parameters, check_functions, check_env, check_queues, check_event_source,
            check_triggers, check_alarms, check_planner_iam, check_converter_iam, check_state_machine,
            check_split_definition, check_visibility_steps]


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
