package pipeline_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"strings"
	"testing"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
)

// New builds a worker's pipeline from the channel config and the AWS
// clients; the syncer then handles each batch of either queue.
func ExampleNew() {
	ctx := context.Background()
	cfg, err := config.Load("connections.json")
	if err != nil {
		log.Fatal(err)
	}
	aws, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	p, err := pipeline.New(cfg,
		pipeline.Clients{DynamoDB: dynamodb.NewFromConfig(aws), SQS: sqs.NewFromConfig(aws), Secrets: secretsmanager.NewFromConfig(aws),
			HTTP: &http.Client{Timeout: 10 * time.Second}},
		pipeline.Names{LimiterTable: "fleetbucket", StateTable: "fleetbucket-state",
			DeferredURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/deferred", DeadURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/dlq"})
	if err != nil {
		log.Fatal(err)
	}
	// A Lambda handler hands each SQS batch over, and reports the
	// messages whose Err is set as batch item failures.
	for _, r := range p.Syncer.HandleBatch(ctx, []syncer.Message{{ID: "1", Body: `{"detail": {}}`}}) {
		fmt.Println(r.ID, r.Err)
	}
}

const oneChannel = `{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"rates":{"path":"/r","limit":{"rate":5,"burst":5}%s}},` +
	`"credentials":{"c1":{%s}}}}}`

func parse(t *testing.T, endpoint, credential string) *config.Config {
	t.Helper()
	cfg, err := config.Parse(fmt.Appendf(nil, oneChannel, endpoint, credential))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// New refuses, at start-up and all at once, what would fail at the first
// job: missing clients and names, a credential in Secrets Manager with no
// client to read it, a route that needs what the dispatcher lacks.
func TestNewRefusesWhatWouldFailLater(t *testing.T) {
	names := pipeline.Names{LimiterTable: "limits", StateTable: "state", DeferredURL: "deferred", DeadURL: "dlq"}
	clients := pipeline.Clients{DynamoDB: &dynamodb.Client{}, SQS: &sqs.Client{}}
	tests := []struct {
		name    string
		cfg     *config.Config
		clients pipeline.Clients
		names   pipeline.Names
		opts    []pipeline.Option
		want    string // "": built
	}{
		{"complete", parse(t, "", `"token_env":"T"`), clients, names, nil, ""},
		{"no clients, no names", parse(t, "", `"token_env":"T"`), pipeline.Clients{}, pipeline.Names{}, nil,
			"Clients.DynamoDB; Clients.SQS; Names.LimiterTable and Names.StateTable; Names.DeferredURL and Names.DeadURL"},
		{"a secret and no Secrets client", parse(t, "", `"secret_id":"bk/c1"`), clients, names, nil, "Clients.Secrets, to read the secret_id of credentials bk/c1"},
		{"a secret, its token supplied", parse(t, "", `"secret_id":"bk/c1"`), clients, names,
			[]pipeline.Option{pipeline.WithToken(func(string) string { return "t" })}, ""},
		{"a local share and no pacer", parse(t, `,"on_store_unavailable":"local-share"`, `"token_env":"T"`), clients, names, nil, "Dispatcher.LocalShare is nil"},
		{"a local share with its pacer", parse(t, `,"on_store_unavailable":"local-share"`, `"token_env":"T"`), clients, names,
			[]pipeline.Option{pipeline.WithLocalShare(4)}, ""},
		{"an adaptive bucket and a limiter without Confirm", parse(t, `,"adaptive":{}`, `"token_env":"T"`), clients, names,
			[]pipeline.Option{pipeline.WithDispatcher(func(d *dispatch.Dispatcher) { d.Limiter = reserveOnly{d.Limiter} })}, "cannot confirm a slot granted ahead (Confirm)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := pipeline.New(tt.cfg, tt.clients, tt.names, tt.opts...)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("New = %v, want a pipeline", err)
				}
				if p.Syncer.Dispatcher != p.Dispatcher {
					t.Fatal("the syncer does not hand its jobs to the dispatcher")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// reserveOnly is a limiter that only reserves.
type reserveOnly struct{ dispatch.Reserver }
