package connections

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
)

// BatchSize is the most items one BatchWriteItem takes (DynamoDB refuses
// more).
const BatchSize = 25

// ImportReport is what an Import wrote and what it cost.
type ImportReport struct {
	Connections int // items written
	Calls       int // BatchWriteItem calls, retries of unprocessed items included
	Retried     int // items DynamoDB handed back unprocessed and written again
}

// Import writes conns with BatchWriteItem, BatchSize a call, Workers calls
// at once (default 4), retrying the items DynamoDB leaves unprocessed with
// a backoff. Every connection is checked first with the file's rules:
// one that fails them writes nothing. A batch write takes no condition, so
// Import overwrites what the store holds (each written at version 1): it
// onboards hotels in bulk; Put edits one.
func (s *Store) Import(ctx context.Context, conns []Connection, workers int) (ImportReport, error) {
	var errs []error
	seen := map[[2]string]bool{}
	for _, c := range conns {
		if err := s.Validate(c); err != nil {
			errs = append(errs, err)
		}
		k := [2]string{c.PropertyID, c.Channel}
		if seen[k] {
			errs = append(errs, fmt.Errorf("properties.%s: two connections to channel %q", c.PropertyID, c.Channel))
		}
		seen[k] = true
	}
	if len(errs) > 0 {
		return ImportReport{}, fmt.Errorf("import: nothing written:\n%w", errors.Join(errs...))
	}
	if workers < 1 {
		workers = 4
	}
	now := s.now()
	batches := make(chan []types.WriteRequest)
	var mu sync.Mutex
	rep := ImportReport{}
	var firstErr error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for b := range batches {
				calls, retried, err := s.writeBatch(ctx, b)
				mu.Lock()
				rep.Calls, rep.Retried = rep.Calls+calls, rep.Retried+retried
				if err == nil {
					rep.Connections += len(b)
				} else if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	for i := 0; i < len(conns); i += BatchSize {
		b := make([]types.WriteRequest, 0, BatchSize)
		for _, c := range conns[i:min(i+BatchSize, len(conns))] {
			c.Version = 1
			b = append(b, types.WriteRequest{PutRequest: &types.PutRequest{Item: encode(c, now)}})
		}
		select {
		case batches <- b:
		case <-ctx.Done():
		}
	}
	close(batches)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return rep, firstErr
}

// writeBatch writes one batch, then what DynamoDB leaves unprocessed (it
// does under throttling), with a doubling backoff from 50 ms up to 5 s.
func (s *Store) writeBatch(ctx context.Context, b []types.WriteRequest) (calls, retried int, err error) {
	wait := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		res, err := s.DB.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{s.Table: b}})
		calls++
		if err != nil {
			return calls, retried, s.wrap("import batch", err)
		}
		b = res.UnprocessedItems[s.Table]
		if len(b) == 0 {
			return calls, retried, nil
		}
		if attempt == 20 {
			return calls, retried, fmt.Errorf("import batch: %d items still unprocessed after %d calls", len(b), calls)
		}
		retried += len(b)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return calls, retried, ctx.Err()
		}
		wait = min(wait*2, 5*time.Second)
	}
}

// FromConfig is the connections a connections file lists under
// "properties", for Import.
func FromConfig(c *config.Config) []Connection {
	var out []Connection
	for _, pid := range slices.Sorted(maps.Keys(c.Properties)) {
		for _, p := range c.Properties[pid] {
			out = append(out, Connection{PropertyID: pid, Property: p})
		}
	}
	return out
}

// TableAdminAPI is the part of *dynamodb.Client CreateTable uses.
type TableAdminAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// CreateTable creates a connections table (on-demand) and waits until it
// is active; an existing one is left alone. In AWS the CDK stack creates
// it.
func CreateTable(ctx context.Context, db TableAdminAPI, name string) error {
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   &name,
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(PartitionKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(SortKey), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(PartitionKey), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(SortKey), KeyType: types.KeyTypeRange},
		},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create connections table %q: %w", name, err)
	}
	return dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &name}, time.Minute)
}
