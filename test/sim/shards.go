package sim

import (
	"context"
	"hash/fnv"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/truora/minidyn/aws-v2/client"
)

// minidyn keeps a table's keys in one sorted slice and sorts it again on
// every new item, so a table's inserts cost O(items) each: quadratic in a
// storm that writes a quarter of a million ARI month items. DB spreads
// items over shards, each a minidyn client with every table, by a hash of
// their partition key; lane items (sort key lane.SortKey), the only ones
// the sweep's index Query reads, all stay in shard 0 with the limiter's
// items, so the index Query and a transaction see one client. A Query on
// a table reads the shard of its partition (queryShard). 1,024 shards keep
// a 2,000-property storm's shards at about 250 items each, so each insert
// sorts 250 keys (3,750 at 64 shards).
const dbShards = 1024

func newShards() []*client.Client {
	out := make([]*client.Client, dbShards)
	for i := range out {
		out[i] = client.NewClient()
	}
	return out
}

// shardOf is the client holding the item with key in table, holding it
// now if it was seeded and not yet put there (seed.go).
func (d *DB) shardOf(table string, key map[string]types.AttributeValue) *client.Client {
	c := d.clientOf(table, key)
	if len(d.unput) > 0 {
		d.putSeeded(c, table, sizeKey(table, key))
	}
	return c
}

// clientOf is the client that holds, or will hold, the item with key in
// table.
func (d *DB) clientOf(table string, key map[string]types.AttributeValue) *client.Client {
	names := d.keys[table]
	if len(names) < 2 || len(d.shards) == 0 {
		return d.c
	}
	if sk, ok := key[names[1]].(*types.AttributeValueMemberS); !ok || sk.Value == lane.SortKey {
		if ok {
			d.laneTables[table] = true
		}
		return d.c
	}
	pk, ok := key[names[0]].(*types.AttributeValueMemberS)
	if !ok {
		return d.c
	}
	return d.partitionShard(pk.Value)
}

func (d *DB) partitionShard(pk string) *client.Client {
	h := fnv.New32a()
	_, _ = h.Write([]byte(pk))
	return d.shards[h.Sum32()%uint32(len(d.shards))]
}

// keyEquals is a key condition's leading "name = :value".
var keyEquals = regexp.MustCompile(`^\s*(#?\w+)\s*=\s*(:\w+)\s*(?:$|AND\s)`)

// queryShard is the client a Query on table (not an index) reads: the
// shard of the partition its key condition names, which holds every item
// of that partition (a property's connections), so that a Query reads
// tens of items, not every item of the fleet (minidyn parses the key
// condition again for each item it scans). A table that holds lane items
// keeps them in shard 0 apart from the rest of their partition: a Query
// there reads shard 0.
func (d *DB) queryShard(table string, in *dynamodb.QueryInput) *client.Client {
	names := d.keys[table]
	m := keyEquals.FindStringSubmatch(aws.ToString(in.KeyConditionExpression))
	if len(names) < 2 || len(d.shards) == 0 || m == nil || d.laneTables[table] {
		return d.c
	}
	name := m[1]
	if n, ok := in.ExpressionAttributeNames[name]; ok {
		name = n
	}
	pk, ok := in.ExpressionAttributeValues[m[2]].(*types.AttributeValueMemberS)
	if name != names[0] || !ok {
		return d.c
	}
	c := d.partitionShard(pk.Value)
	if part, ok := partKey(table, pk); ok && len(d.unput) > 0 {
		for sk := range d.parts[part] {
			d.putSeeded(c, table, sk)
		}
	}
	return c
}

// batchGet reads every requested key from its shard, one BatchGetItem per
// shard, and merges the answers.
func (d *DB) batchGet(ctx context.Context, in *dynamodb.BatchGetItemInput) (*dynamodb.BatchGetItemOutput, error) {
	parts := map[*client.Client]*dynamodb.BatchGetItemInput{}
	var order []*client.Client
	for t, ka := range in.RequestItems {
		for _, k := range ka.Keys {
			c := d.clientOf(t, k)
			p := parts[c]
			if p == nil {
				p = &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{}}
				parts[c] = p
				order = append(order, c)
			}
			cur := p.RequestItems[t]
			if cur.Keys == nil {
				cur = ka
				cur.Keys = nil
			}
			cur.Keys = append(cur.Keys, k)
			p.RequestItems[t] = cur
		}
	}
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	for _, c := range order {
		o, err := d.batchGetShard(ctx, c, parts[c])
		if err != nil {
			return nil, err
		}
		for t, items := range o.Responses {
			out.Responses[t] = append(out.Responses[t], items...)
		}
		for t, ka := range o.UnprocessedKeys {
			if out.UnprocessedKeys == nil {
				out.UnprocessedKeys = map[string]types.KeysAndAttributes{}
			}
			cur := out.UnprocessedKeys[t]
			cur.Keys = append(cur.Keys, ka.Keys...)
			out.UnprocessedKeys[t] = cur
		}
	}
	return out, nil
}

// createTable creates the table in shard 0 and every other shard.
func (d *DB) createTable(ctx context.Context, in *dynamodb.CreateTableInput) (*dynamodb.CreateTableOutput, error) {
	out, err := d.c.CreateTable(ctx, in)
	if err != nil {
		return out, err
	}
	for _, c := range d.shards {
		cp := *in
		cp.TableName = aws.String(aws.ToString(in.TableName))
		if _, err := c.CreateTable(ctx, &cp); err != nil {
			return nil, err
		}
	}
	return out, nil
}
