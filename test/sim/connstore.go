package sim

import (
	"context"
	"errors"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	connstore "github.com/fleetbucket/fleetbucket/sdk/pipeline/connections"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
)

// connectionsTable is where a scenario with StoredConnections keeps its
// properties' connections (sdk/pipeline/connections).
const connectionsTable = "connections"

// connReader is the store's view of DB for the function: a property's
// Query and the unmapped counters' UpdateItem, both billed as DB bills
// them. The function never scans or batch-writes the table.
type connReader struct{ *DB }

func (connReader) Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return nil, errors.New("sim: the function does not scan the connections table")
}

func (connReader) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, errors.New("sim: the function does not put connections")
}

func (connReader) BatchWriteItem(context.Context, *dynamodb.BatchWriteItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return nil, errors.New("sim: the function does not import connections")
}

// connLoader writes an import's items into DB unbilled and at once: the
// connections are in the table before the run, as an operator's import
// puts them there, and their writes are no part of the run's cost.
type connLoader struct {
	connReader
	mu sync.Mutex
}

func (l *connLoader) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.DB
	d.mu.Lock()
	defer d.mu.Unlock()
	for table, reqs := range in.RequestItems {
		for _, r := range reqs {
			if r.PutRequest == nil {
				return nil, errors.New("sim: an import only puts")
			}
			key := keyOf(d.keys[table], r.PutRequest.Item)
			d.forget(sizeKey(table, key))
			if _, err := d.shardOf(table, key).PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: r.PutRequest.Item}); err != nil {
				return nil, err
			}
			d.setSize(table, key, itemSize(r.PutRequest.Item))
		}
	}
	return &dynamodb.BatchWriteItemOutput{}, nil
}

// keyOf is item's key attributes.
func keyOf(names []string, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	key := make(map[string]types.AttributeValue, len(names))
	for _, n := range names {
		key[n] = item[n]
	}
	return key
}

// loadConnections creates the connections table and imports the config's
// properties into it, as `fleetbucket connections import` would.
func (s *sim) loadConnections(ctx context.Context, cfg *config.Config) error {
	if err := connstore.CreateTable(ctx, s.db, connectionsTable); err != nil {
		return err
	}
	store := &connstore.Store{DB: &connLoader{connReader: connReader{s.db}}, Table: connectionsTable, Config: cfg}
	_, err := store.Import(ctx, connstore.FromConfig(cfg), 1)
	return err
}

// withStoredConnections has an instance's syncer read connections from
// the table through its own cache, as functions/sync does with
// FLEETBUCKET_CONNECTIONS_TABLE set: one Query per property per
// connstore.DefaultMaxAge in each execution environment.
func (s *sim) withStoredConnections(db connstore.DynamoDBAPI) func(*syncer.Syncer) {
	return func(sy *syncer.Syncer) {
		store := &connstore.Store{DB: db, Table: connectionsTable, Config: s.cfg}
		sy.Connections = &connstore.Cache{Source: store, Config: s.cfg}
	}
}
