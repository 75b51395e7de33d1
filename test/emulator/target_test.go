package emulator

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Where a run may go: the local stack on loopback, a brought endpoint only
// with a prefix (and a region), never an endpoint off this machine without
// one.
func TestCheckEnv(t *testing.T) {
	const dynamoLocal, stack, aws = "http://localhost:8000", "http://127.0.0.1:4566", "https://dynamodb.eu-west-1.amazonaws.com"
	tests := []struct {
		name                 string
		dynamo, sqs, prefix  string
		region               string
		wantErr              string // "" for none
		wantNotConfiguredErr bool
	}{
		{name: "the local stack", dynamo: stack, sqs: stack},
		{name: "nothing configured", wantNotConfiguredErr: true, wantErr: "local stack not configured"},
		{name: "no SQS endpoint", dynamo: stack, wantNotConfiguredErr: true, wantErr: "local stack not configured"},
		{name: "AWS without a prefix", dynamo: aws, sqs: stack, wantErr: "AWS_ENDPOINT_URL_DYNAMODB=" + aws + " is not on this machine"},
		{name: "a docker host without a prefix", dynamo: "http://dynamodb-local:8000", sqs: stack, wantErr: "is not on this machine"},
		{name: "DynamoDB Local with a prefix", dynamo: dynamoLocal, sqs: stack, prefix: "ci", region: "eu-west-1"},
		{name: "AWS with a prefix", prefix: "ci-42_x", region: "eu-west-1"},
		{name: "a prefix without a region", prefix: "ci", wantErr: "AWS_REGION is not"},
		{name: "a prefix a queue name cannot hold", prefix: "ci.x", region: "eu-west-1", wantErr: "want 1 to 24 of"},
		{name: "a prefix too long", prefix: strings.Repeat("p", 25), region: "eu-west-1", wantErr: "want 1 to 24 of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": tt.dynamo, "AWS_ENDPOINT_URL_SQS": tt.sqs,
				"AWS_ENDPOINT_URL_SECRETS_MANAGER": "", "AWS_ENDPOINT_URL": "", PrefixEnv: tt.prefix,
				"AWS_REGION": tt.region, "AWS_DEFAULT_REGION": ""} {
				t.Setenv(k, v)
			}
			err := checkEnv()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("checkEnv = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("checkEnv = %v, want an error containing %q", err, tt.wantErr)
			case errors.Is(err, ErrNotConfigured) != tt.wantNotConfiguredErr:
				t.Fatalf("checkEnv = %v: is ErrNotConfigured %v, want %v (only that one may skip a test)", err, !tt.wantNotConfiguredErr, tt.wantNotConfiguredErr)
			}
		})
	}
}

// Every name starts with the prefix and this run's tag, and fits the
// service's limit however long the test's name.
func TestNameCarriesThePrefixAndFits(t *testing.T) {
	t.Setenv(PrefixEnv, "ci-7")
	long := strings.Repeat("TestSomething/with_a_subtest", 10)
	for _, max := range []int{80, 255} {
		n := Name(long, max)
		if !strings.HasPrefix(n, "ci-7"+runTag+"-") || len(n) > max {
			t.Errorf("Name(long, %d) = %q (%d chars), want the prefix ci-7%s- and at most %d chars", max, n, len(n), runTag, max)
		}
	}
	t.Setenv(PrefixEnv, "")
	if n := Name("t-x", 255); !strings.HasPrefix(n, "t-x-") {
		t.Errorf("on the local stack Name(t-x) = %q, want no prefix", n)
	}
}

const childEnv = "FLEETBUCKET_EMULATOR_CHILD"

// A test that fails after creating tables and a queue on a brought endpoint
// leaves nothing behind, and names what it created with the prefix. The
// failing test runs in a child process (this test binary again) against a
// private moto server that nothing else uses, so that whatever is left on
// it after the child exits is a leak.
func TestBroughtEndpointCleansUpAFailedTest(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("the parent of TestBroughtEndpointChild")
	}
	m := StartMoto(t) // serves DynamoDB and SQS; no long polls here
	cmd := exec.Command(os.Args[0], "-test.run=^TestBroughtEndpointChild$", "-test.count=1", "-test.v")
	cmd.Env = append(BroughtEnv(m.Endpoint, m.Endpoint, "fbtest"), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "failing on purpose after creating") {
		t.Fatalf("the child ran without failing as planned (err %v):\n%s", err, out)
	}
	if strings.Contains(string(out), "lacks the prefix") {
		t.Fatalf("the child created a resource without the prefix:\n%s", out)
	}
	if left := Leftovers(t, m.Endpoint, m.Endpoint); len(left) > 0 {
		t.Fatalf("the failed child left %v on the brought endpoint; want nothing", left)
	}
}

// TestBroughtEndpointChild is the failing test of
// TestBroughtEndpointCleansUpAFailedTest; it runs only as its child.
func TestBroughtEndpointChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("runs only as the child of TestBroughtEndpointCleansUpAFailedTest")
	}
	if !Brought() {
		t.Fatal("the child is not on a brought endpoint")
	}
	db, q := DynamoDB(t), SQS(t)
	names := []string{NewTable(t, db), NewStateTable(t, db), NewQueue(t, q, "changes")}
	tables, err := db.ListTables(t.Context(), &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatal(err)
	}
	queues, err := q.ListQueues(t.Context(), &sqs.ListQueuesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tables.TableNames) != 2 || len(queues.QueueUrls) != 1 {
		t.Errorf("the endpoint holds tables %v and queues %v, want the 2 and 1 just created", tables.TableNames, queues.QueueUrls)
	}
	for _, n := range names {
		if !strings.Contains(n, Prefix()) {
			t.Errorf("%s lacks the prefix %s", n, Prefix())
		}
	}
	t.Fatalf("failing on purpose after creating %v", names)
}

// Sweep deletes what this run left under its prefix, and nothing of
// another run sharing the prefix, or of anyone else.
func TestSweepDeletesOnlyThisRunsResources(t *testing.T) {
	m := StartThreadedMoto(t) // before the environment says "brought"
	for k, v := range map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": m.Endpoint, "AWS_ENDPOINT_URL_SQS": m.Endpoint,
		"AWS_ENDPOINT_URL_SECRETS_MANAGER": m.Endpoint, "AWS_REGION": "us-east-1", PrefixEnv: "fbsweep"} {
		t.Setenv(k, v)
	}
	db, q := DynamoDB(t), SQS(t)
	ctx := t.Context()
	create := func(table, queue string) {
		t.Helper()
		in := &dynamodb.CreateTableInput{TableName: &table, BillingMode: "PAY_PER_REQUEST",
			KeySchema:            []dtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dtypes.KeyTypeHash}},
			AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dtypes.ScalarAttributeTypeS}}}
		if _, err := db.CreateTable(ctx, in); err != nil {
			t.Fatal(err)
		}
		if _, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &queue}); err != nil {
			t.Fatal(err)
		}
	}
	create(Name("leaked", 255), Name("leaked", 80))                    // this run's, never deleted
	create("fbsweep"+"zzzzzz-other-run", "fbsweep"+"zzzzzz-other-run") // another run, same prefix
	create("someone-elses", "someone-elses")
	deleted, err := Sweep(ctx, db, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 2 {
		t.Errorf("Sweep deleted %v, want this run's table and queue", deleted)
	}
	var left []string // names: a queue URL ends with its queue's
	for _, l := range Leftovers(t, m.Endpoint, m.Endpoint) {
		left = append(left, l[strings.LastIndex(l, "/")+1:])
	}
	slices.Sort(left)
	want := []string{"fbsweepzzzzzz-other-run", "fbsweepzzzzzz-other-run", "someone-elses", "someone-elses"}
	if !slices.Equal(left, want) {
		t.Errorf("left after the sweep: %v, want %v", left, want)
	}
}
