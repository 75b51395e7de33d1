package stack_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/fleetbucket/fleetbucket/infra/stack"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/connections"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
)

type (
	obj = map[string]interface{}
	arr = []interface{}
)

// testMaxConcurrency is deliberately not the app's value, to prove the prop
// reaches both event source mappings.
const (
	testMaxConcurrency = 7
	testStackName      = "FleetbucketSyncTest"
	testTokenSecret    = "fleetbucket/OTA_TOKEN_MAIN"
	testTokenSecretARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:ota-second-AbCdEf"
	testAlarmEmail     = "ops@example.com"
	// testReserved is ReservedConcurrencyFor(7): both event sources at 7,
	// plus the minimum headroom of 2.
	testReserved = 2*testMaxConcurrency + 2
)

var testQuotas = []stack.Quota{
	{Channel: "expedia", Credential: "ex-main", Meter: "rates", Rate: 8, Burst: 8},
	{Channel: "booking_com", Credential: "bk-main", Meter: "availability", Rate: 10, Burst: 20},
}

// fixture is one synthesized stack (with the cdk-nag AwsSolutions pack
// applied) shared by the tests: starting jsii and synthesizing cost seconds.
type fixture struct {
	stack    *stack.SyncStack
	template assertions.Template
	json     obj
	outdir   string
}

var (
	fixOnce  sync.Once
	fix      *fixture
	fixErr   error
	tempDirs []string
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range tempDirs {
		_ = os.RemoveAll(d)
	}
	jsii.Close()
	os.Exit(code)
}

func mkdirTemp(prefix string) (string, error) {
	d, err := os.MkdirTemp("", prefix)
	if err == nil {
		tempDirs = append(tempDirs, d)
	}
	return d, err
}

// writeAsset makes a stand-in asset directory: the stack only hashes and
// copies it, so the real binary is not needed here (infra/app tests build it).
func writeAsset(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, stack.BootstrapFile), []byte("#!/bin/sh\n# test stand-in\n"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, stack.ConnectionsFile), []byte(`{"channels": {}, "properties": {}}`), 0o644)
}

func getFixture(t *testing.T) *fixture {
	t.Helper()
	fixOnce.Do(func() {
		fixErr = func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("synthesizing panicked: %v", r)
				}
			}()
			assetDir, err := mkdirTemp("fleetbucket-stack-test-asset-")
			if err != nil {
				return err
			}
			if err := writeAsset(assetDir); err != nil {
				return err
			}
			outdir, err := mkdirTemp("fleetbucket-stack-test-out-")
			if err != nil {
				return err
			}
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(outdir)})
			awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{
				Verbose: jsii.Bool(true),
				Reports: jsii.Bool(true),
			}), nil)
			s, err := stack.NewSyncStack(app, testStackName, &stack.Props{
				AssetDir:       assetDir,
				MaxConcurrency: testMaxConcurrency,
				TokenSecretIDs: []string{testTokenSecret, testTokenSecretARN},
				Alarms:         stack.Alarms{Email: testAlarmEmail},
				Quotas:         testQuotas,
			})
			if err != nil {
				return err
			}
			tmpl := assertions.Template_FromStack(s.Stack, nil)
			raw, err := json.Marshal(tmpl.ToJSON())
			if err != nil {
				return err
			}
			var j obj
			if err := json.Unmarshal(raw, &j); err != nil {
				return err
			}
			fix = &fixture{stack: s, template: tmpl, json: j, outdir: outdir}
			return nil
		}()
	})
	if fixErr != nil {
		t.Fatalf("fixture: %v", fixErr)
	}
	return fix
}

// check runs an assertions call; a failed assertion panics, which becomes
// t.Errorf so one test reports every failed check.
func check(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s:\n%v", what, r)
		}
	}()
	f()
}

// id returns the logical ID of an L2 construct's CloudFormation resource.
func id(t *testing.T, s *stack.SyncStack, c constructs.IConstruct) string {
	t.Helper()
	el, ok := c.Node().DefaultChild().(awscdk.CfnElement)
	if !ok {
		t.Fatalf("%s has no CloudFormation resource child", *c.Node().Path())
	}
	return *s.Stack.GetLogicalId(el)
}

func getAtt(logicalID, attr string) obj { return obj{"Fn::GetAtt": arr{logicalID, attr}} }
func ref(logicalID string) obj          { return obj{"Ref": logicalID} }

// ------------------------------------------------------------------ tests --

func TestTables(t *testing.T) {
	f := getFixture(t)
	tm := f.template
	check(t, "three tables", func() { tm.ResourceCountIs(jsii.String("AWS::DynamoDB::Table"), jsii.Number(3)) })
	check(t, "connections table", func() {
		tm.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), obj{
			"KeySchema": arr{
				obj{"AttributeName": connections.PartitionKey, "KeyType": "HASH"},
				obj{"AttributeName": connections.SortKey, "KeyType": "RANGE"},
			},
			"AttributeDefinitions": arr{
				obj{"AttributeName": connections.PartitionKey, "AttributeType": "S"},
				obj{"AttributeName": connections.SortKey, "AttributeType": "S"},
			},
			"BillingMode":                      "PAY_PER_REQUEST",
			"PointInTimeRecoverySpecification": obj{"PointInTimeRecoveryEnabled": true},
		})
	})
	check(t, "limiter table", func() {
		tm.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), obj{
			"KeySchema":                        arr{obj{"AttributeName": limiter.KeyAttribute, "KeyType": "HASH"}},
			"AttributeDefinitions":             arr{obj{"AttributeName": limiter.KeyAttribute, "AttributeType": "S"}},
			"TimeToLiveSpecification":          obj{"AttributeName": limiter.TTLAttribute, "Enabled": true},
			"BillingMode":                      "PAY_PER_REQUEST",
			"PointInTimeRecoverySpecification": assertions.Match_Absent(), // TTL'd, ephemeral: nothing to restore
		})
	})
	check(t, "state table", func() {
		tm.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), obj{
			"KeySchema": arr{
				obj{"AttributeName": "pk", "KeyType": "HASH"},
				obj{"AttributeName": "sk", "KeyType": "RANGE"},
			},
			"AttributeDefinitions": arr{
				obj{"AttributeName": "pk", "AttributeType": "S"},
				obj{"AttributeName": "sk", "AttributeType": "S"},
				obj{"AttributeName": lane.SweepAttribute, "AttributeType": "S"},
				obj{"AttributeName": lane.SweepAtAttribute, "AttributeType": "N"},
			},
			"BillingMode":                      "PAY_PER_REQUEST",
			"PointInTimeRecoverySpecification": obj{"PointInTimeRecoveryEnabled": true},
			// The sweep finds stranded lanes here, never by a scan.
			"GlobalSecondaryIndexes": arr{obj{
				"IndexName": lane.SweepIndex,
				"KeySchema": arr{
					obj{"AttributeName": lane.SweepAttribute, "KeyType": "HASH"},
					obj{"AttributeName": lane.SweepAtAttribute, "KeyType": "RANGE"},
				},
				"Projection": obj{"ProjectionType": "KEYS_ONLY"},
			}},
		})
	})
	check(t, "tables are retained", func() {
		tm.AllResources(jsii.String("AWS::DynamoDB::Table"), obj{"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"})
	})
}

func TestEventBusAndRule(t *testing.T) {
	f := getFixture(t)
	s, tm := f.stack, f.template
	check(t, "custom bus", func() {
		tm.HasResourceProperties(jsii.String("AWS::Events::EventBus"), obj{"Name": stack.DefaultBusName})
	})
	check(t, "two rules: PMS changes and the sweep's schedule", func() { tm.ResourceCountIs(jsii.String("AWS::Events::Rule"), jsii.Number(2)) })
	check(t, "the sweep's schedule invokes the function every 5 minutes with the sweep action", func() {
		tm.HasResourceProperties(jsii.String("AWS::Events::Rule"), obj{
			"ScheduleExpression": "rate(5 minutes)",
			"State":              "ENABLED",
			"EventBusName":       assertions.Match_Absent(), // schedules run on the default bus
			"Targets": arr{obj{
				"Arn":   getAtt(id(t, s, s.Function), "Arn"),
				"Id":    assertions.Match_AnyValue(),
				"Input": `{"action":"` + syncer.SweepAction + `"}`,
			}},
		})
	})
	check(t, "only the sweep's schedule may invoke the function from EventBridge", func() {
		tm.HasResourceProperties(jsii.String("AWS::Lambda::Permission"), obj{
			"Action":       "lambda:InvokeFunction",
			"FunctionName": getAtt(id(t, s, s.Function), "Arn"),
			"Principal":    "events.amazonaws.com",
			"SourceArn":    getAtt(id(t, s, s.SweepRule), "Arn"),
		})
	})
	check(t, "rule: source pms on the bus, to the changes queue, undeliverable to the DLQ", func() {
		tm.HasResourceProperties(jsii.String("AWS::Events::Rule"), obj{
			"EventBusName": ref(id(t, s, s.Bus)),
			"EventPattern": obj{"source": arr{"pms"}},
			"State":        "ENABLED",
			"Targets": arr{obj{
				"Arn":              getAtt(id(t, s, s.ChangesQueue), "Arn"),
				"DeadLetterConfig": obj{"Arn": getAtt(id(t, s, s.DeadLetterQueue), "Arn")},
			}},
		})
	})
	check(t, "the changes queue's policy lets only this rule send", func() {
		tm.HasResourceProperties(jsii.String("AWS::SQS::QueuePolicy"), obj{
			"Queues": arr{ref(id(t, s, s.ChangesQueue))},
			"PolicyDocument": assertions.Match_ObjectLike(&obj{"Statement": assertions.Match_ArrayWith(&arr{
				assertions.Match_ObjectLike(&obj{
					"Effect":    "Allow",
					"Principal": obj{"Service": "events.amazonaws.com"},
					"Action":    assertions.Match_ArrayWith(&arr{"sqs:SendMessage"}),
					"Resource":  getAtt(id(t, s, s.ChangesQueue), "Arn"),
					"Condition": obj{"ArnEquals": obj{"aws:SourceArn": getAtt(id(t, s, s.Rule), "Arn")}},
				}),
			})}),
		})
	})
}

func TestQueues(t *testing.T) {
	f := getFixture(t)
	s, tm := f.stack, f.template
	check(t, "three queues", func() { tm.ResourceCountIs(jsii.String("AWS::SQS::Queue"), jsii.Number(3)) })
	dlq := id(t, s, s.DeadLetterQueue)
	for name, q := range map[string]constructs.IConstruct{"changes": s.ChangesQueue, "deferred": s.DeferredQueue} {
		want := obj{
			"RedrivePolicy":          obj{"deadLetterTargetArn": getAtt(dlq, "Arn"), "maxReceiveCount": 5},
			"VisibilityTimeout":      360,
			"SqsManagedSseEnabled":   true,
			"MessageRetentionPeriod": 4 * 24 * 3600,
		}
		got := f.resource(t, id(t, s, q))["Properties"]
		if !jsonEqual(got, want) {
			t.Errorf("%s queue: properties %s, want %s (redrive to the DLQ after 5, visibility 6x the 60 s timeout, SSE-SQS, 4 days)",
				name, mustJSON(got), mustJSON(want))
		}
	}
	check(t, "DLQ: SSE-SQS, 14 days, no redrive of its own", func() {
		tm.HasResourceProperties(jsii.String("AWS::SQS::Queue"), obj{
			"SqsManagedSseEnabled":   true,
			"MessageRetentionPeriod": 14 * 24 * 3600,
			"RedrivePolicy":          assertions.Match_Absent(),
		})
	})
	for name, q := range map[string]constructs.IConstruct{"changes": s.ChangesQueue, "deferred": s.DeferredQueue, "dead-letter": s.DeadLetterQueue} {
		check(t, name+" queue policy denies non-TLS access", func() {
			tm.HasResourceProperties(jsii.String("AWS::SQS::QueuePolicy"), obj{
				"Queues": arr{ref(id(t, s, q))},
				"PolicyDocument": assertions.Match_ObjectLike(&obj{"Statement": assertions.Match_ArrayWith(&arr{obj{
					"Effect":    "Deny",
					"Principal": obj{"AWS": "*"},
					"Action":    "sqs:*",
					"Resource":  getAtt(id(t, s, q), "Arn"),
					"Condition": obj{"Bool": obj{"aws:SecureTransport": "false"}},
				}})}),
			})
		})
	}
	if got := stack.VisibilityTimeoutSeconds(stack.DefaultFunctionTimeout); got != 360 {
		t.Errorf("VisibilityTimeoutSeconds(60s) = %d, want 360", got)
	}
}

func TestFunction(t *testing.T) {
	f := getFixture(t)
	s, tm := f.stack, f.template
	check(t, "one function", func() { tm.ResourceCountIs(jsii.String("AWS::Lambda::Function"), jsii.Number(1)) })
	check(t, "function: runtime, architecture, handler, timeout, log group, environment", func() {
		tm.HasResourceProperties(jsii.String("AWS::Lambda::Function"), obj{
			"Runtime":       "provided.al2023",
			"Architectures": arr{"arm64"},
			"Handler":       "bootstrap",
			"Timeout":       60,
			"RecursiveLoop": "Allow", // the deferred queue loops on purpose; dropping a job loses it
			"Role":          getAtt(id(t, s, s.Role), "Arn"),
			"LoggingConfig": obj{"LogGroup": ref(id(t, s, s.LogGroup))},
			"Environment": obj{"Variables": assertions.Match_ObjectEquals(&obj{
				"FLEETBUCKET_TABLE":              ref(id(t, s, s.LimiterTable)),
				"FLEETBUCKET_STATE_TABLE":        ref(id(t, s, s.StateTable)),
				"FLEETBUCKET_CONNECTIONS_TABLE":  ref(id(t, s, s.ConnectionsTable)),
				"FLEETBUCKET_DEFERRED_QUEUE_URL": ref(id(t, s, s.DeferredQueue)),
				"FLEETBUCKET_DLQ_URL":            ref(id(t, s, s.DeadLetterQueue)),
				"FLEETBUCKET_MAX_RECEIVE_COUNT":  "5",
				"FLEETBUCKET_CONNECTIONS":        "connections.json",
				"FLEETBUCKET_METRICS_NAMESPACE":  "fleetbucket",
				// and no token: the function reads its secrets at run time
			})},
		})
	})
	check(t, "log group keeps 30 days", func() {
		tm.HasResourceProperties(jsii.String("AWS::Logs::LogGroup"), obj{"RetentionInDays": 30})
	})
}

func TestEventSourceMappings(t *testing.T) {
	f := getFixture(t)
	s, tm := f.stack, f.template
	check(t, "two event source mappings", func() {
		tm.ResourceCountIs(jsii.String("AWS::Lambda::EventSourceMapping"), jsii.Number(2))
	})
	for _, src := range []struct {
		name   string
		q      constructs.IConstruct
		batch  obj
		window bool
	}{
		{"changes", s.ChangesQueue, obj{"BatchSize": 100, "MaximumBatchingWindowInSeconds": 1}, true},
		{"deferred", s.DeferredQueue, obj{"BatchSize": 10}, false},
	} {
		check(t, src.name+" queue event source", func() {
			props := obj{
				"EventSourceArn":        getAtt(id(t, s, src.q), "Arn"),
				"FunctionName":          ref(id(t, s, s.Function)),
				"FunctionResponseTypes": arr{"ReportBatchItemFailures"},
				"ScalingConfig":         obj{"MaximumConcurrency": testMaxConcurrency},
			}
			for k, v := range src.batch {
				props[k] = v
			}
			if !src.window {
				// Deferred jobs come back at their slots: no gathering.
				props["MaximumBatchingWindowInSeconds"] = assertions.Match_Absent()
			}
			tm.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), props)
		})
	}
}

// TestIAMLeastPrivilege walks every IAM policy statement: DynamoDB and SQS
// actions are the expected ones, on the expected resources, never "*".
func TestIAMLeastPrivilege(t *testing.T) {
	f := getFixture(t)
	s := f.stack
	lim, st, conn := id(t, s, s.LimiterTable), id(t, s, s.StateTable), id(t, s, s.ConnectionsTable)
	chg, def, dlq := id(t, s, s.ChangesQueue), id(t, s, s.DeferredQueue), id(t, s, s.DeadLetterQueue)
	consume := []string{"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:ReceiveMessage"}
	// action -> the set of resources (logical IDs of GetAtt Arn) it may apply to
	want := map[string][]string{
		// conn: a property's connections (Query), the counter of a code met unmapped (UpdateItem)
		"dynamodb:GetItem":      {lim, st}, // st: the sweep reads the lane items its index lists
		"dynamodb:Query":        {st + "/index/" + lane.SweepIndex, conn},
		"dynamodb:BatchGetItem": {st}, // a push's render; the limiter never batch-reads
		"dynamodb:UpdateItem":   {lim, st, conn},
		"sqs:SendMessage":       {chg, def, dlq}, // chg: a failed change sent again after a backoff (syncer.Retry)
		"logs:CreateLogStream":  {id(t, s, s.LogGroup)},
		"logs:PutLogEvents":     {id(t, s, s.LogGroup)},
	}
	for _, a := range consume {
		want[a] = []string{chg, def}
	}
	got := map[string][]string{}

	secretStatements := 0
	policies := f.resources("AWS::IAM::Policy")
	if len(policies) == 0 {
		t.Fatal("no AWS::IAM::Policy in the template")
	}
	for pid, res := range policies {
		doc := res["Properties"].(obj)["PolicyDocument"].(obj)
		for i, stmtRaw := range doc["Statement"].([]interface{}) {
			stmt := stmtRaw.(obj)
			where := fmt.Sprintf("%s statement %d", pid, i)
			if stmt["Effect"] != "Allow" {
				continue
			}
			if _, ok := stmt["NotAction"]; ok {
				t.Errorf("%s uses NotAction", where)
			}
			if _, ok := stmt["NotResource"]; ok {
				t.Errorf("%s uses NotResource", where)
			}
			actions := strs(stmt["Action"])
			if len(actions) == 1 && actions[0] == "secretsmanager:GetSecretValue" {
				secretStatements++
				b, _ := json.Marshal(stmt["Resource"])
				want := `[{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},":secretsmanager:",{"Ref":"AWS::Region"},":",{"Ref":"AWS::AccountId"},":secret:` +
					testTokenSecret + `-??????"]]},"` + testTokenSecretARN + `"]`
				if string(b) != want {
					t.Errorf("%s: GetSecretValue on %s, want exactly the config's secrets %s", where, b, want)
				}
				continue
			}
			var resIDs []string
			for _, r := range asList(stmt["Resource"]) {
				if str, ok := r.(string); ok {
					if strings.Contains(str, "*") {
						t.Errorf("%s: wildcard resource %q for %v", where, str, actions)
					} else {
						t.Errorf("%s: literal resource %q for %v (want a reference to one of the stack's resources)", where, str, actions)
					}
					continue
				}
				b, _ := json.Marshal(r)
				if strings.Contains(string(b), "*") {
					t.Errorf("%s: resource %s contains a wildcard", where, b)
				}
				if idx, ok := indexARN(r); ok {
					resIDs = append(resIDs, idx)
					continue
				}
				ga, ok := r.(obj)["Fn::GetAtt"].([]interface{})
				if !ok || len(ga) != 2 || ga[1] != "Arn" {
					t.Errorf("%s: resource %s is not a GetAtt Arn", where, b)
					continue
				}
				resIDs = append(resIDs, ga[0].(string))
			}
			for _, a := range actions {
				if strings.Contains(a, "*") {
					t.Errorf("%s: wildcard action %q", where, a)
				}
				if _, ok := want[a]; !ok {
					t.Errorf("%s: unexpected action %q on %v", where, a, resIDs)
					continue
				}
				got[a] = append(got[a], resIDs...)
			}
		}
	}
	for a, w := range want {
		g := append([]string(nil), got[a]...)
		sort.Strings(g)
		w = append([]string(nil), w...)
		sort.Strings(w)
		if strings.Join(g, ",") != strings.Join(w, ",") {
			t.Errorf("%s is granted on %v, want exactly %v", a, g, w)
		}
	}

	if secretStatements != 1 {
		t.Errorf("%d GetSecretValue statements, want 1", secretStatements)
	}
	check(t, "the role has no managed policies", func() {
		f.template.HasResourceProperties(jsii.String("AWS::IAM::Role"), obj{
			"ManagedPolicyArns": assertions.Match_Absent(),
			"AssumeRolePolicyDocument": assertions.Match_ObjectLike(&obj{"Statement": arr{obj{
				"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": obj{"Service": "lambda.amazonaws.com"},
			}}}),
		})
		f.template.ResourceCountIs(jsii.String("AWS::IAM::Role"), jsii.Number(1))
	})
}

// indexARN reads a resource that is one of the stack's tables' indexes,
// {"Fn::Join": ["", [{"Fn::GetAtt": [table, "Arn"]}, "/index/<name>"]]},
// as "<table>/index/<name>".
func indexARN(r interface{}) (string, bool) {
	join, ok := r.(obj)["Fn::Join"].([]interface{})
	if !ok || len(join) != 2 || join[0] != "" {
		return "", false
	}
	parts, ok := join[1].([]interface{})
	if !ok || len(parts) != 2 {
		return "", false
	}
	ga, ok := parts[0].(obj)["Fn::GetAtt"].([]interface{})
	suffix, sok := parts[1].(string)
	if !ok || !sok || len(ga) != 2 || ga[1] != "Arn" || !strings.HasPrefix(suffix, "/index/") {
		return "", false
	}
	return ga[0].(string) + suffix, true
}

func TestReservedConcurrency(t *testing.T) {
	for mc, want := range map[int]int{2: 6, 7: 16, 10: 22, 50: 110, 1000: 2200} {
		if got := stack.ReservedConcurrencyFor(mc); got != want {
			t.Errorf("ReservedConcurrencyFor(%d) = %d, want %d", mc, got, want)
		}
	}
	f := getFixture(t)
	if f.stack.ReservedConcurrency != testReserved {
		t.Errorf("SyncStack.ReservedConcurrency = %d, want %d", f.stack.ReservedConcurrency, testReserved)
	}
	check(t, "function reserves ReservedConcurrencyFor(MaxConcurrency)", func() {
		f.template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), obj{"ReservedConcurrentExecutions": testReserved})
	})
	// Every event source at its cap at once stays within the reservation:
	// Lambda never throttles the function's own event sources.
	total := 0
	for lid, r := range f.resources("AWS::Lambda::EventSourceMapping") {
		mc, _ := r["Properties"].(obj)["ScalingConfig"].(obj)["MaximumConcurrency"].(float64)
		if mc < stack.MinMaxConcurrency || int(mc) > testReserved {
			t.Errorf("%s: MaximumConcurrency %v, want in [2, reserved %d]", lid, mc, testReserved)
		}
		total += int(mc)
	}
	if total == 0 || total > testReserved {
		t.Errorf("event sources' MaximumConcurrency sum to %d, want in [1, reserved %d]", total, testReserved)
	}
}

func TestAlarms(t *testing.T) {
	f := getFixture(t)
	s, tm := f.stack, f.template
	const alarms = 9
	check(t, "nine alarms", func() { tm.ResourceCountIs(jsii.String("AWS::CloudWatch::Alarm"), jsii.Number(alarms)) })
	if len(s.Alarms) != alarms {
		t.Errorf("SyncStack.Alarms has %d, want %d", len(s.Alarms), alarms)
	}
	topic := ref(id(t, s, s.AlarmTopic))
	check(t, "every alarm notifies the topic when it fires and when it is OK again; missing data is no traffic", func() {
		tm.AllResourcesProperties(jsii.String("AWS::CloudWatch::Alarm"), obj{
			"AlarmActions":       arr{topic},
			"OKActions":          arr{topic},
			"ComparisonOperator": "GreaterThanThreshold",
			"TreatMissingData":   "notBreaching",
		})
	})
	alarm := func(what string, props obj) {
		t.Helper()
		check(t, what, func() { tm.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), props) })
	}
	queueAge := func(q constructs.IConstruct, threshold int) obj {
		return obj{
			"Namespace":  "AWS/SQS",
			"MetricName": "ApproximateAgeOfOldestMessage",
			"Dimensions": arr{obj{"Name": "QueueName", "Value": getAtt(id(t, s, q), "QueueName")}},
			"Statistic":  "Maximum", "Period": 60, "Threshold": threshold,
			"EvaluationPeriods": 2, "DatapointsToAlarm": 2,
		}
	}
	alarm("changes queue freshness: oldest message over 300 s", queueAge(s.ChangesQueue, 300))
	alarm("deferred queue freshness: 900 s of delay + 300 s", queueAge(s.DeferredQueue, 1200))
	alarm("Lambda throttles over 5 minutes", obj{
		"Namespace": "AWS/Lambda", "MetricName": "Throttles", "Statistic": "Sum", "Period": 300, "Threshold": 0, "EvaluationPeriods": 1,
		"Dimensions": arr{obj{"Name": "FunctionName", "Value": ref(id(t, s, s.Function))}},
	})
	alarm("DLQ depth above 0", obj{
		"Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible", "Threshold": 0, "EvaluationPeriods": 1,
		"Dimensions": arr{obj{"Name": "QueueName", "Value": getAtt(id(t, s, s.DeadLetterQueue), "QueueName")}},
	})
	alarm("function errors over 5 minutes", obj{
		"Namespace": "AWS/Lambda", "MetricName": "Errors", "Statistic": "Sum", "Period": 300, "Threshold": 0,
		"Dimensions": arr{obj{"Name": "FunctionName", "Value": ref(id(t, s, s.Function))}},
	})
	alarm("store errors in 3 of 3 consecutive minutes (EMF, no dimensions)", obj{
		"Namespace": "fleetbucket", "MetricName": "LimiterStoreErrors", "Statistic": "Sum", "Period": 60,
		"Threshold": 0, "EvaluationPeriods": 3, "DatapointsToAlarm": 3, "Dimensions": assertions.Match_Absent(),
	})
	alarm("a credential refused (EMF, any in 5 minutes)", obj{
		"Namespace": "fleetbucket", "MetricName": stack.MetricCredentialRefusals, "Statistic": "Sum", "Period": 300,
		"Threshold": 0, "EvaluationPeriods": 1, "Dimensions": assertions.Match_Absent(),
	})
	alarm("a hotel refused (EMF, any in 5 minutes)", obj{
		"Namespace": "fleetbucket", "MetricName": stack.MetricHotelRefusals, "Statistic": "Sum", "Period": 300,
		"Threshold": 0, "EvaluationPeriods": 1, "Dimensions": assertions.Match_Absent(),
	})
	alarm("429 share: above 5 % over one 5-minute period", obj{
		"Threshold": 5, "EvaluationPeriods": 1, "DatapointsToAlarm": 1,
		"Metrics": assertions.Match_ArrayWith(&arr{assertions.Match_ObjectLike(&obj{"Expression": stack.ThrottleShareExpression(20)})}),
	})
	// The expression's inputs: the EMF sums over 5 minutes, no dimensions.
	found := false
	for lid, r := range f.resources("AWS::CloudWatch::Alarm") {
		metrics, ok := r["Properties"].(obj)["Metrics"].([]interface{})
		if !ok {
			continue
		}
		found = true
		inputs := map[string]interface{}{}
		for _, m := range metrics {
			m := m.(obj)
			if m["Expression"] != nil {
				if m["ReturnData"] == false {
					t.Errorf("%s: the expression does not return data", lid)
				}
				continue
			}
			inputs[m["Id"].(string)] = m["MetricStat"]
		}
		want := map[string]interface{}{
			"pushes":    obj{"Metric": obj{"Namespace": "fleetbucket", "MetricName": "Pushes"}, "Period": 300, "Stat": "Sum"},
			"throttles": obj{"Metric": obj{"Namespace": "fleetbucket", "MetricName": "VendorThrottles"}, "Period": 300, "Stat": "Sum"},
		}
		if !jsonEqual(inputs, want) {
			t.Errorf("%s: the 429 share's inputs are %s, want %s", lid, mustJSON(inputs), mustJSON(want))
		}
	}
	if !found {
		t.Errorf("no metric math alarm (the 429 share)")
	}
	if got := stack.ThrottleShareExpression(20); got != "IF((pushes + throttles) >= 20, 100 * throttles / (pushes + throttles), 0)" {
		t.Errorf("ThrottleShareExpression(20) = %q", got)
	}
	// What the old alarms did, and must not come back: page on any 429, or
	// on a single store error.
	for lid, r := range f.resources("AWS::CloudWatch::Alarm") {
		p := r["Properties"].(obj)
		if p["MetricName"] == "VendorThrottles" {
			t.Errorf("%s alarms on VendorThrottles alone: any 429 would page", lid)
		}
		if p["MetricName"] == "LimiterStoreErrors" && p["DatapointsToAlarm"] != float64(3) {
			t.Errorf("%s: a single store error would page (DatapointsToAlarm %v)", lid, p["DatapointsToAlarm"])
		}
	}
}

// TestAlarmTopic: the created topic is encrypted with a key CloudWatch
// may use, refuses plain HTTP, lets this account's alarms publish, and
// mails alarmEmail.
func TestAlarmTopic(t *testing.T) {
	f := getFixture(t)
	s, tm := f.stack, f.template
	keys := f.resources("AWS::KMS::Key")
	if len(keys) != 1 {
		t.Fatalf("%d KMS keys, want 1 (the alarm topic's)", len(keys))
	}
	var key string
	for k := range keys {
		key = k
	}
	topic := id(t, s, s.AlarmTopic)
	check(t, "one topic, encrypted with the stack's key", func() {
		tm.ResourceCountIs(jsii.String("AWS::SNS::Topic"), jsii.Number(1))
		tm.HasResourceProperties(jsii.String("AWS::SNS::Topic"), obj{"KmsMasterKeyId": getAtt(key, "Arn")})
	})
	check(t, "key rotates, and CloudWatch of this account may use it", func() {
		tm.HasResourceProperties(jsii.String("AWS::KMS::Key"), obj{
			"EnableKeyRotation": true,
			"KeyPolicy": assertions.Match_ObjectLike(&obj{"Statement": assertions.Match_ArrayWith(&arr{obj{
				"Sid": "CloudWatchAlarmsPublish", "Effect": "Allow",
				"Principal": obj{"Service": "cloudwatch.amazonaws.com"},
				"Action":    arr{"kms:Decrypt", "kms:GenerateDataKey*"},
				"Resource":  "*",
				"Condition": obj{"StringEquals": obj{"aws:SourceAccount": ref("AWS::AccountId")}},
			}})}),
		})
	})
	check(t, "topic policy: CloudWatch of this account publishes, no plain HTTP", func() {
		tm.HasResourceProperties(jsii.String("AWS::SNS::TopicPolicy"), obj{
			"Topics": arr{ref(topic)},
			"PolicyDocument": assertions.Match_ObjectLike(&obj{"Statement": assertions.Match_ArrayWith(&arr{
				assertions.Match_ObjectLike(&obj{"Effect": "Deny", "Condition": obj{"Bool": obj{"aws:SecureTransport": "false"}}}),
				obj{
					"Sid": "CloudWatchAlarmsPublish", "Effect": "Allow",
					"Principal": obj{"Service": "cloudwatch.amazonaws.com"},
					"Action":    "sns:Publish",
					"Resource":  ref(topic),
					"Condition": obj{"StringEquals": obj{"aws:SourceAccount": ref("AWS::AccountId")}},
				},
			})}),
		})
	})
	check(t, "alarmEmail is subscribed", func() {
		tm.ResourceCountIs(jsii.String("AWS::SNS::Subscription"), jsii.Number(1))
		tm.HasResourceProperties(jsii.String("AWS::SNS::Subscription"), obj{"Protocol": "email", "Endpoint": testAlarmEmail, "TopicArn": ref(topic)})
	})
}

// TestImportedTopicAndNoReservation synthesizes a second stack: with
// alarmTopicArn the alarms notify that topic and the stack creates no
// topic, key or subscription; NoReservedConcurrency reserves nothing.
func TestImportedTopicAndNoReservation(t *testing.T) {
	getFixture(t) // jsii is up
	const arn = "arn:aws:sns:eu-west-1:123456789012:pager"
	j, findings := synthOne(t, "Imported", stack.Props{
		MaxConcurrency: 3, ReservedConcurrency: stack.NoReservedConcurrency,
		Alarms: stack.Alarms{TopicArn: arn, MaxQueueAge: 120 * time.Second, MaxThrottlePercent: 2.5, ThrottleAlarmMinRequests: 50, StoreErrorMinutes: 5},
	})
	if len(findings) > 0 {
		t.Errorf("cdk-nag AwsSolutions findings:\n  %s", strings.Join(findings, "\n  "))
	}
	f := &fixture{json: j}
	for _, typ := range []string{"AWS::SNS::Topic", "AWS::SNS::Subscription", "AWS::KMS::Key"} {
		if n := len(f.resources(typ)); n != 0 {
			t.Errorf("%d %s with an imported topic, want none", n, typ)
		}
	}
	thresholds := map[string]bool{}
	for lid, r := range f.resources("AWS::CloudWatch::Alarm") {
		p := r["Properties"].(obj)
		if !jsonEqual(p["AlarmActions"], arr{arn}) || !jsonEqual(p["OKActions"], arr{arn}) {
			t.Errorf("%s: actions %v / %v, want the imported %s", lid, p["AlarmActions"], p["OKActions"], arn)
		}
		thresholds[fmt.Sprintf("%v/%v", p["MetricName"], p["Threshold"])] = true
		if p["MetricName"] == "LimiterStoreErrors" && p["DatapointsToAlarm"] != float64(5) {
			t.Errorf("store errors alarm: DatapointsToAlarm %v, want storeErrorMinutes 5", p["DatapointsToAlarm"])
		}
		if m, ok := p["Metrics"].([]interface{}); ok && m[0].(obj)["Expression"] != stack.ThrottleShareExpression(50) {
			t.Errorf("429 share expression %v, want the minimum of 50 requests", m[0].(obj)["Expression"])
		}
	}
	for _, want := range []string{"ApproximateAgeOfOldestMessage/120", "ApproximateAgeOfOldestMessage/1020", "<nil>/2.5"} {
		if !thresholds[want] {
			t.Errorf("no alarm with metric/threshold %s (have %v)", want, thresholds)
		}
	}
	for lid, r := range f.resources("AWS::Lambda::Function") {
		if v, ok := r["Properties"].(obj)["ReservedConcurrentExecutions"]; ok {
			t.Errorf("%s reserves %v with NoReservedConcurrency", lid, v)
		}
	}
}

// TestDashboard: per-bucket metrics from the push job log line, and a
// dashboard with each bucket against its quota, totals, queues, the
// function and DynamoDB per push.
func TestDashboard(t *testing.T) {
	f := getFixture(t)
	s, tm := f.stack, f.template
	check(t, "six per-bucket metric filters on the function's log group", func() {
		tm.ResourceCountIs(jsii.String("AWS::Logs::MetricFilter"), jsii.Number(6))
		tm.AllResourcesProperties(jsii.String("AWS::Logs::MetricFilter"), obj{
			"LogGroupName":  ref(id(t, s, s.LogGroup)),
			"FilterPattern": assertions.Match_StringLikeRegexp(jsii.String(`^\{ \$\.msg = "push job"( && .*)? \}$`)),
			"MetricTransformations": arr{assertions.Match_ObjectLike(&obj{
				"MetricNamespace": "fleetbucket/buckets",
				"Dimensions":      arr{obj{"Key": "Bucket", "Value": "$.bucket"}},
			})},
		})
	})
	for metric, value := range map[string]string{
		"Pushes": "$.pushes", "VendorThrottles": "$.throttled", "WastedSlots": "$.wasted_slots",
		"WaitTime": "$.wait_ms", "DeliveryLateness": "$.late_ms", "Deferrals": "1",
	} {
		check(t, "metric filter "+metric, func() {
			tm.HasResourceProperties(jsii.String("AWS::Logs::MetricFilter"), obj{
				"MetricTransformations": arr{assertions.Match_ObjectLike(&obj{"MetricName": metric, "MetricValue": value})},
			})
		})
	}
	check(t, "deferrals count deferred decisions; lateness only late deliveries", func() {
		tm.HasResourceProperties(jsii.String("AWS::Logs::MetricFilter"), obj{"FilterPattern": `{ $.msg = "push job" && $.decision = "deferred" }`})
		tm.HasResourceProperties(jsii.String("AWS::Logs::MetricFilter"), obj{"FilterPattern": `{ $.msg = "push job" && $.late_ms > 0 }`})
	})

	dashboards := f.resources("AWS::CloudWatch::Dashboard")
	if len(dashboards) != 1 {
		t.Fatalf("%d dashboards, want 1", len(dashboards))
	}
	var body string
	for _, d := range dashboards {
		body = flatten(d["Properties"].(obj)["DashboardBody"])
	}
	var parsed struct {
		Widgets []struct {
			Type       string
			Properties struct {
				Title       string
				Markdown    string
				Annotations struct {
					Horizontal []struct {
						Value float64
						Label string
					}
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &parsed); err != nil {
		t.Fatalf("dashboard body is not JSON once its references are replaced: %v\n%s", err, body)
	}
	titles := map[string][]float64{}
	var markdown string
	for _, w := range parsed.Widgets {
		for _, a := range w.Properties.Annotations.Horizontal {
			titles[w.Properties.Title] = append(titles[w.Properties.Title], a.Value)
		}
		if _, ok := titles[w.Properties.Title]; !ok {
			titles[w.Properties.Title] = nil
		}
		markdown += w.Properties.Markdown
	}
	wantAnnotations := map[string][]float64{
		"booking_com#bk-main#availability":                         {10}, // each bucket against its own quota
		"expedia#ex-main#rates":                                    {8},
		"Pushes per second, all buckets, against the summed quota": {18},
		"Age of the oldest message (s)":                            {300, 1200},
		"Sync function concurrency":                                {testReserved, 2 * testMaxConcurrency},
		"OTA 429s per minute, and their share of requests (%)":     {5},
	}
	for title, want := range wantAnnotations {
		got, ok := titles[title]
		if !ok {
			t.Errorf("no widget %q (have %v)", title, titles)
		} else if !jsonEqual(got, want) {
			t.Errorf("widget %q: annotations %v, want %v", title, got, want)
		}
	}
	for _, title := range []string{
		"Alarms", "Job outcomes per minute", "Slots: granted and wasted per minute",
		"p99 wait per job by bucket (ms)", "p99 delivery lateness of deferred jobs by bucket (ms)",
		"Queue depth", "Dead-letter queue depth", "DynamoDB calls per push (capacity units per grant / per push)",
		"Pushes per minute by bucket (all buckets)",
	} {
		if _, ok := titles[title]; !ok {
			t.Errorf("no widget %q", title)
		}
	}
	for _, want := range []string{
		"| booking_com#bk-main#availability | 10 | 20 |", "| expedia#ex-main#rates | 8 | 8 |", // quota table
	} {
		if !strings.Contains(markdown, want) {
			t.Errorf("dashboard text lacks %q:\n%s", want, markdown)
		}
	}
	for _, want := range []string{
		`SEARCH('{fleetbucket/buckets,Bucket} MetricName=\"WaitTime\"', 'p99', 60)`,
		`"pushes / PERIOD(pushes)"`, `"grants / PERIOD(grants)"`, `"lw / grants"`, `"(sw + sr) / pushes"`,
		`"ApproximateNumberOfMessagesDelayed"`, `"ConsumedWriteCapacityUnits"`, `"ConditionalCheckFailedRequests"`,
		`["fleetbucket/buckets","Pushes","Bucket","booking_com#bk-main#availability"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("dashboard body lacks %s", want)
		}
	}
}

// flatten renders a CloudFormation string (a literal or an Fn::Join of
// literals and references) with each reference as REF.
func flatten(v interface{}) string {
	switch v := v.(type) {
	case string:
		return v
	case obj:
		if j, ok := v["Fn::Join"].([]interface{}); ok && len(j) == 2 {
			var parts []string
			for _, p := range j[1].([]interface{}) {
				parts = append(parts, flatten(p))
			}
			return strings.Join(parts, j[0].(string))
		}
	}
	return "REF"
}

func TestOutputs(t *testing.T) {
	f := getFixture(t)
	s, tm := f.stack, f.template
	for name, value := range map[string]interface{}{
		"EventBusName":       ref(id(t, s, s.Bus)),
		"ChangesQueueUrl":    ref(id(t, s, s.ChangesQueue)),
		"DeferredQueueUrl":   ref(id(t, s, s.DeferredQueue)),
		"DeadLetterQueueUrl": ref(id(t, s, s.DeadLetterQueue)),
		"LimiterTableName":   ref(id(t, s, s.LimiterTable)),
		"StateTableName":     ref(id(t, s, s.StateTable)),
		"SyncFunctionName":   ref(id(t, s, s.Function)),
		"AlarmTopicArn":      ref(id(t, s, s.AlarmTopic)),
		"DashboardName":      ref(id(t, s, s.Dashboard)),
	} {
		check(t, "output "+name, func() { tm.HasOutput(jsii.String(name), obj{"Value": value}) })
	}
	check(t, "output ConnectionsTableName", func() {
		tm.HasOutput(jsii.String("ConnectionsTableName"), obj{"Value": ref(id(t, s, s.ConnectionsTable))})
	})
}

// TestCdkNag: the AwsSolutions pack finds nothing, it did run, and every
// suppression carries a reason.
func TestCdkNag(t *testing.T) {
	f := getFixture(t)
	findings := nagFindings(t, f.stack.Stack)
	if len(findings) > 0 {
		t.Errorf("cdk-nag AwsSolutions findings:\n  %s", strings.Join(findings, "\n  "))
	}

	// The report lists every rule the pack evaluated per resource: proof
	// that the pack ran, and the place suppressions show up with reasons.
	// Named AwsSolutions-<stage path>-<stack>-NagReport.csv (the stage path is
	// empty for an App).
	matches, _ := filepath.Glob(filepath.Join(f.outdir, "AwsSolutions-*"+testStackName+"-NagReport.csv"))
	report := filepath.Join(f.outdir, "AwsSolutions-"+testStackName+"-NagReport.csv")
	if len(matches) == 1 {
		report = matches[0]
	}
	fh, err := os.Open(report)
	if err != nil {
		entries, _ := os.ReadDir(f.outdir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("cdk-nag report: %v (the output directory holds %v)", err, names)
	}
	defer fh.Close()
	rows, err := csv.NewReader(fh).ReadAll()
	if err != nil {
		t.Fatalf("cdk-nag report %s: %v", report, err)
	}
	if len(rows) < 2 {
		t.Fatalf("cdk-nag report %s is empty: did the pack run?", report)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, h := range []string{"Rule ID", "Resource ID", "Compliance", "Exception Reason"} {
		if _, ok := col[h]; !ok {
			t.Fatalf("cdk-nag report header %v lacks %q", rows[0], h)
		}
	}
	compliant := 0
	seen := map[string]bool{} // each synthesis appends the rows again
	for _, r := range rows[1:] {
		key := strings.Join(r, "\x00")
		if seen[key] {
			continue
		}
		seen[key] = true
		switch r[col["Compliance"]] {
		case "Compliant":
			compliant++
		case "Non-Compliant":
			t.Errorf("cdk-nag: %s is non-compliant with %s", r[col["Resource ID"]], r[col["Rule ID"]])
		case "Suppressed":
			if reason := strings.TrimSpace(r[col["Exception Reason"]]); len(reason) < 20 {
				t.Errorf("cdk-nag: suppression of %s on %s has no real reason (%q)", r[col["Rule ID"]], r[col["Resource ID"]], reason)
			} else {
				t.Logf("cdk-nag suppression: %s on %s: %s", r[col["Rule ID"]], r[col["Resource ID"]], reason)
			}
		}
	}
	if compliant == 0 {
		t.Errorf("cdk-nag report has no compliant rule: did the pack run?")
	}
}

// TestCfnLint lints the synthesized template with cfn-lint.
// synthOne synthesizes a stack of props (its AssetDir a fresh asset
// directory) in an app of its own under cdk-nag's AwsSolutions checks, and
// returns its template and the checks' findings. The fixture must be up
// (jsii running).
func synthOne(t *testing.T, id string, props stack.Props) (obj, []string) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("synthesizing panicked: %v", r)
		}
	}()
	dir, err := mkdirTemp("fleetbucket-stack-test-asset-")
	if err == nil {
		err = writeAsset(dir)
	}
	if err != nil {
		t.Fatal(err)
	}
	props.AssetDir = dir
	app := awscdk.NewApp(nil)
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{}), nil)
	s, err := stack.NewSyncStack(app, id, &props)
	if err != nil {
		t.Fatal(err)
	}
	var j obj
	raw, err := json.Marshal(assertions.Template_FromStack(s.Stack, nil).ToJSON())
	if err == nil {
		err = json.Unmarshal(raw, &j)
	}
	if err != nil {
		t.Fatal(err)
	}
	return j, nagFindings(t, s.Stack)
}

// nagFindings lists the cdk-nag AwsSolutions errors and warnings on st.
func nagFindings(t *testing.T, st awscdk.Stack) []string {
	t.Helper()
	ann := assertions.Annotations_FromStack(st)
	nag := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-"))
	// Decoded through JSON: the messages' Go type (cxapi.SynthesisMessage)
	// is deprecated in favour of one the Go bindings do not expose.
	var msgs []struct {
		ID    string `json:"id"`
		Level string `json:"level"`
		Entry struct {
			Data interface{} `json:"data"`
		} `json:"entry"`
	}
	raw, err := json.Marshal(append(*ann.FindError(jsii.String("*"), nag), *ann.FindWarning(jsii.String("*"), nag)...))
	if err == nil {
		err = json.Unmarshal(raw, &msgs)
	}
	if err != nil {
		t.Fatalf("decoding the annotations: %v", err)
	}
	var findings []string
	for _, m := range msgs {
		findings = append(findings, fmt.Sprintf("%s %s: %v", m.Level, m.ID, m.Entry.Data))
	}
	return findings
}

func TestCfnLint(t *testing.T) {
	cfnLint(t, getFixture(t).json)
}

// cfnLint lints template j with cfn-lint, which reports what CloudFormation
// would refuse at deploy time (and what it only warns of).
func cfnLint(t *testing.T, j obj) {
	t.Helper()
	bin, err := exec.LookPath("cfn-lint")
	if err != nil {
		if os.Getenv("FLEETBUCKET_INTEGRATION") == "1" {
			t.Fatalf("cfn-lint is not on PATH (FLEETBUCKET_INTEGRATION=1 requires it): %v", err)
		}
		t.Skip("cfn-lint is not on PATH: skipping the template lint (pip install cfn-lint; FLEETBUCKET_INTEGRATION=1 makes this a failure)")
	}
	b, err := json.MarshalIndent(j, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "template.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--format", "parseable", "--", path)
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Errorf("cfn-lint exited with %d (2 errors, 4 warnings, 8 informational):\n%s", ee.ExitCode(), out)
		} else {
			t.Errorf("cfn-lint: %v\n%s", err, out)
		}
	}
}

// On provisioned capacity the limiter and state tables start at their minima, and auto
// scaling keeps each table's reads and writes, and the sweep index's, on
// the target utilization within their ranges; cdk-nag and cfn-lint accept
// the template.
func TestProvisionedCapacity(t *testing.T) {
	getFixture(t) // jsii is up
	limiterCap := &stack.Capacity{Read: stack.Range{Min: 5, Max: 100}, Write: stack.Range{Min: 100, Max: 4000}}
	stateCap := &stack.Capacity{Read: stack.Range{Min: 50, Max: 1500}, Write: stack.Range{Min: 80, Max: 3000}, TargetUtilization: 60}
	j, findings := synthOne(t, "Provisioned", stack.Props{MaxConcurrency: 3, LimiterCapacity: limiterCap, StateCapacity: stateCap})
	if len(findings) > 0 {
		t.Errorf("cdk-nag AwsSolutions findings:\n  %s", strings.Join(findings, "\n  "))
	}
	f := &fixture{json: j}
	throughput := map[string]string{}
	for _, r := range f.resources("AWS::DynamoDB::Table") {
		p := r["Properties"].(obj)
		if len(asList(p["KeySchema"])) == 2 && p["GlobalSecondaryIndexes"] == nil {
			continue // the connections table: on demand whatever the capacity
		}
		if _, ok := p["BillingMode"]; ok && p["BillingMode"] != "PROVISIONED" {
			t.Errorf("a table's BillingMode is %v, want provisioned", p["BillingMode"])
		}
		pt, _ := p["ProvisionedThroughput"].(obj)
		throughput[fmt.Sprint(len(asList(p["KeySchema"])))] = fmt.Sprintf("%v/%v", pt["ReadCapacityUnits"], pt["WriteCapacityUnits"])
		for _, ix := range asList(p["GlobalSecondaryIndexes"]) {
			if ipt, _ := ix.(obj)["ProvisionedThroughput"].(obj); fmt.Sprintf("%v/%v", ipt["ReadCapacityUnits"], ipt["WriteCapacityUnits"]) != "1/1" {
				t.Errorf("the sweep index starts at %v, want 1 read and 1 write unit", ipt)
			}
		}
	}
	// The limiter table has a hash key only, the state table a sort key too.
	if want := map[string]string{"1": "5/100", "2": "50/80"}; !jsonEqual(throughput, want) {
		t.Errorf("tables start at read/write units %v (by key count), want %v", throughput, want)
	}
	ranges := map[string]int{}
	for _, r := range f.resources("AWS::ApplicationAutoScaling::ScalableTarget") {
		p := r["Properties"].(obj)
		ranges[fmt.Sprintf("%v %v..%v", p["ScalableDimension"], p["MinCapacity"], p["MaxCapacity"])]++
	}
	want := map[string]int{
		"dynamodb:table:ReadCapacityUnits 5..100": 1, "dynamodb:table:WriteCapacityUnits 100..4000": 1,
		"dynamodb:table:ReadCapacityUnits 50..1500": 1, "dynamodb:table:WriteCapacityUnits 80..3000": 1,
		"dynamodb:index:ReadCapacityUnits 1..1500": 1, "dynamodb:index:WriteCapacityUnits 1..3000": 1,
	}
	if !jsonEqual(ranges, want) {
		t.Errorf("scalable targets %v, want %v", ranges, want)
	}
	targets := map[string]int{}
	for _, r := range f.resources("AWS::ApplicationAutoScaling::ScalingPolicy") {
		c, _ := r["Properties"].(obj)["TargetTrackingScalingPolicyConfiguration"].(obj)
		targets[fmt.Sprint(c["TargetValue"])]++
	}
	if want := map[string]int{"70": 2, "60": 4}; !jsonEqual(targets, want) {
		t.Errorf("scaling policies by target utilization %v, want %v", targets, want)
	}
	cfnLint(t, j)
}

// TestPropsValidation needs no jsii: invalid props fail before any construct.
func TestPropsValidation(t *testing.T) {
	good := t.TempDir()
	if err := writeAsset(good); err != nil {
		t.Fatal(err)
	}
	noConfig := t.TempDir()
	if err := os.WriteFile(filepath.Join(noConfig, stack.BootstrapFile), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	slowPush := t.TempDir()
	if err := writeAsset(slowPush); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(slowPush, stack.ConnectionsFile), []byte(`{"push_timeout": "5m", "channels": {}, "properties": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		props *stack.Props
		want  string
	}{
		{"nil props", nil, "AssetDir is empty"},
		{"missing asset dir", &stack.Props{AssetDir: filepath.Join(good, "nope"), MaxConcurrency: 5}, "no such file"},
		{"asset dir without config", &stack.Props{AssetDir: noConfig, MaxConcurrency: 5}, stack.ConnectionsFile},
		{"max concurrency 1", &stack.Props{AssetDir: good, MaxConcurrency: 1}, "MaxConcurrency 1"},
		{"max concurrency 1001", &stack.Props{AssetDir: good, MaxConcurrency: 1001}, "MaxConcurrency 1001"},
		{"timeout 901s", &stack.Props{AssetDir: good, MaxConcurrency: 5, FunctionTimeout: 901 * time.Second}, "FunctionTimeout"},
		{"timeout 1.5s", &stack.Props{AssetDir: good, MaxConcurrency: 5, FunctionTimeout: 1500 * time.Millisecond}, "FunctionTimeout"},
		// The lane lease (2 min) must outlast an invocation and a push.
		{"timeout + push_timeout at the lane lease", &stack.Props{AssetDir: good, MaxConcurrency: 5, FunctionTimeout: 100 * time.Second},
			"FunctionTimeout 1m40s + push_timeout 20s"},
		{"timeout 900s", &stack.Props{AssetDir: good, MaxConcurrency: 5, FunctionTimeout: 900 * time.Second}, "lower FunctionTimeout below 1m40s"},
		{"push_timeout 5m at the default timeout", &stack.Props{AssetDir: slowPush, MaxConcurrency: 5}, "FunctionTimeout 1m0s + push_timeout 5m0s"},
		{"memory 64", &stack.Props{AssetDir: good, MaxConcurrency: 5, MemoryMiB: 64}, "MemoryMiB"},
		{"token secret empty", &stack.Props{AssetDir: good, MaxConcurrency: 5, TokenSecretIDs: []string{" "}}, "invalid secret id"},
		{"token secret wildcard", &stack.Props{AssetDir: good, MaxConcurrency: 5, TokenSecretIDs: []string{"fleetbucket/*"}}, "no wildcards"},
		{"reserved below the event sources' caps", &stack.Props{AssetDir: good, MaxConcurrency: 5, ReservedConcurrency: 9}, "below the event sources' caps"},
		{"alarm topic not an SNS ARN", &stack.Props{AssetDir: good, MaxConcurrency: 5, Alarms: stack.Alarms{TopicArn: "arn:aws:sqs:eu-west-1:1:q"}}, "not an SNS topic ARN"},
		{"alarm email with an imported topic", &stack.Props{AssetDir: good, MaxConcurrency: 5, Alarms: stack.Alarms{TopicArn: "arn:aws:sns:eu-west-1:1:t", Email: "a@example.com"}}, "subscribe to that topic yourself"},
		{"alarm email invalid", &stack.Props{AssetDir: good, MaxConcurrency: 5, Alarms: stack.Alarms{Email: "Ops <a@example.com>"}}, "not a plain e-mail address"},
		{"throttle percent 150", &stack.Props{AssetDir: good, MaxConcurrency: 5, Alarms: stack.Alarms{MaxThrottlePercent: 150}}, "MaxThrottlePercent"},
		{"queue age 1.5s", &stack.Props{AssetDir: good, MaxConcurrency: 5, Alarms: stack.Alarms{MaxQueueAge: 1500 * time.Millisecond}}, "MaxQueueAge"},
		{"quota bucket with #", &stack.Props{AssetDir: good, MaxConcurrency: 5, Quotas: []stack.Quota{{Channel: "a#b", Credential: "c", Meter: "e", Rate: 1, Burst: 1}}}, "without #"},
		{"quota rate 0", &stack.Props{AssetDir: good, MaxConcurrency: 5, Quotas: []stack.Quota{{Channel: "a", Credential: "c", Meter: "e", Burst: 1}}}, "want rate > 0"},
		{"limiter capacity min 0", &stack.Props{AssetDir: good, MaxConcurrency: 5, LimiterCapacity: &stack.Capacity{Read: stack.Range{Min: 0, Max: 5}, Write: stack.Range{Min: 1, Max: 5}}}, "LimiterCapacity.Read"},
		{"state capacity max below min", &stack.Props{AssetDir: good, MaxConcurrency: 5, StateCapacity: &stack.Capacity{Read: stack.Range{Min: 5, Max: 5}, Write: stack.Range{Min: 10, Max: 5}}}, "StateCapacity.Write"},
		{"capacity above the table quota", &stack.Props{AssetDir: good, MaxConcurrency: 5, StateCapacity: &stack.Capacity{Read: stack.Range{Min: 5, Max: 50000}, Write: stack.Range{Min: 1, Max: 5}}}, "≤ 40000"},
		{"target utilization 95", &stack.Props{AssetDir: good, MaxConcurrency: 5, LimiterCapacity: &stack.Capacity{Read: stack.Range{Min: 1, Max: 5}, Write: stack.Range{Min: 1, Max: 5}, TargetUtilization: 95}}, "TargetUtilization 95"},
		{"parity check every 30 minutes", &stack.Props{AssetDir: good, MaxConcurrency: 5, ParityChecks: []stack.ParityCheck{{Property: "p", Channel: "c", Every: 30 * time.Minute}}}, "at least 1h"},
		{"parity check without a channel", &stack.Props{AssetDir: good, MaxConcurrency: 5, ParityChecks: []stack.ParityCheck{{Property: "p", Every: time.Hour}}}, "property and channel are required"},
		{"token secret not a secret ARN", &stack.Props{AssetDir: good, MaxConcurrency: 5, TokenSecretIDs: []string{"arn:aws:ssm:eu-west-1:1:parameter/x"}}, "not a Secrets Manager ARN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := stack.NewSyncStack(nil, "X", tc.props)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewSyncStack = %v, %v; want an error containing %q", s, err, tc.want)
			}
		})
	}
}

// ---------------------------------------------------------------- helpers --

func (f *fixture) resources(typ string) map[string]obj {
	out := map[string]obj{}
	for lid, r := range f.json["Resources"].(obj) {
		if r := r.(obj); r["Type"] == typ {
			out[lid] = r
		}
	}
	return out
}

func (f *fixture) resource(t *testing.T, logicalID string) obj {
	t.Helper()
	r, ok := f.json["Resources"].(obj)[logicalID].(obj)
	if !ok {
		t.Fatalf("no resource %s in the template", logicalID)
	}
	return r
}

func asList(v interface{}) []interface{} {
	if l, ok := v.([]interface{}); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []interface{}{v}
}

func strs(v interface{}) []string {
	var out []string
	for _, x := range asList(v) {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func mustJSON(v interface{}) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

// jsonEqual compares two values by their JSON form (numbers as float64).
func jsonEqual(a, b interface{}) bool {
	var x, y interface{}
	if json.Unmarshal([]byte(mustJSON(a)), &x) != nil || json.Unmarshal([]byte(mustJSON(b)), &y) != nil {
		return false
	}
	return mustJSON(x) == mustJSON(y)
}
