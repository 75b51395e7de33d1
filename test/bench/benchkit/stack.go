// Package benchkit is the harness of fleetbucket's benchmarks: it meters
// what a DynamoDB client sends and what DynamoDB would bill for it, runs a
// fleet of workers on one bucket for a fixed time, and connects to the local
// stack without a testing.TB, so that the benchmarks (test/bench,
// test/benchcompare) and programs (the seed figure) all measure the same
// way. Every number it produces is meant to be read as a ratio within one
// run: calls per grant, grants per allowed token.
package benchkit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// ErrNoStack says the local stack's endpoints are not in the environment.
var ErrNoStack = errors.New(`local stack not configured: run eval "$(scripts/localstack.sh start)" first, or use scripts/bench.sh`)

// Config is an AWS config for the local stack (or whatever
// AWS_ENDPOINT_URL_DYNAMODB and AWS_ENDPOINT_URL_SQS point at), with dummy
// credentials. It fails with ErrNoStack when those are unset, so that a
// benchmark never runs against real AWS by accident.
func Config(ctx context.Context) (aws.Config, error) {
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" || os.Getenv("AWS_ENDPOINT_URL_SQS") == "" {
		return aws.Config{}, ErrNoStack
	}
	return config.LoadDefaultConfig(ctx,
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
	)
}

// NewTable creates a limiter table named prefix-<random> and returns its
// name and a function that deletes it.
func NewTable(ctx context.Context, db *dynamodb.Client, prefix string) (string, func(), error) {
	name := fmt.Sprintf("%s-%08x", prefix, rand.Uint32())
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := limiter.CreateTable(cctx, db, name); err != nil {
		return "", nil, fmt.Errorf("create table %s: %w", name, err)
	}
	drop := func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name})
	}
	return name, drop, nil
}
