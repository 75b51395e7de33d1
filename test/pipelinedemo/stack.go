package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// stack is one run's own tables and queues on the local emulators, so runs
// never see each other's state.
type stack struct {
	cfg                              aws.Config
	db                               *dynamodb.Client
	sqs                              *sqs.Client
	table, stateTable                string
	changesURL, deferredURL, deadURL string
}

func newStack(ctx context.Context) (_ *stack, err error) {
	// The local stack, or the endpoint the user brings (docs/operations.md);
	// its logger is emulator.QuietCancelled, as the run ends by cancelling
	// the calls its pollers and workers still have in flight.
	cfg, err := emulator.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w (or run scripts/demo.sh)", err)
	}
	s := &stack{cfg: cfg, db: dynamodb.NewFromConfig(cfg, emulator.ForEmulator), sqs: sqs.NewFromConfig(cfg)}
	run := emulator.Name("demo", 60) // a queue name adds at most 9
	s.table, s.stateTable = run+"-limits", run+"-state"
	// A brought endpoint keeps nothing of a run, even one that fails here.
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if err := limiter.CreateTable(ctx, s.db, s.table); err != nil {
		return nil, err
	}
	if err := ari.CreateTable(ctx, s.db, s.stateTable); err != nil {
		return nil, err
	}
	for name, url := range map[string]*string{"changes": &s.changesURL, "deferred": &s.deferredURL, "dlq": &s.deadURL} {
		out, err := s.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(run + "-" + name)})
		if err != nil {
			return nil, fmt.Errorf("create queue %s: %w", name, err)
		}
		*url = *out.QueueUrl
	}
	return s, nil
}

// close deletes what the run created.
func (s *stack) close() {
	ctx := context.Background()
	for _, t := range []string{s.table, s.stateTable} {
		if t != "" {
			_, _ = s.db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(t)})
		}
	}
	for _, q := range []string{s.changesURL, s.deferredURL, s.deadURL} {
		if q != "" {
			_, _ = s.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(q)})
		}
	}
}
