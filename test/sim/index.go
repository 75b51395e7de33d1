package sim

import (
	"bytes"
	"context"
	"fmt"
	"math/big"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DB answers a Query on a global secondary index itself: minidyn v0.8.2
// keeps an index as a sorted slice of index keys beside a map from item to
// index key, and an update that gives an item its first index key
// overwrites the slice's first entry instead of adding one (an update
// that removes it leaves both behind), so a query on a sparse index found
// one of four lanes stranded at one instant, and none of four stranded at
// four. DB reads the table instead, as the index would hold it: minidyn
// scans it with the key condition as a filter (DynamoDB's semantics for
// the comparisons, a missing attribute matching nothing), and DB orders
// the items by the index's sort key (numbers by value), pages them and
// projects them as the index's projection says.
//
// The table is read from shard 0 alone (shards.go): it holds every lane
// item, the only items the pipeline lists in an index.

// maxPageBytes is how much a Query reads before it stops and answers
// a LastEvaluatedKey.
const maxPageBytes = 1 << 20

// gsi is what DB needs of an index: its key attributes and projection.
type gsi struct {
	hash, sort string
	projection types.Projection
}

// rememberIndexes records in's global secondary indexes, under d.mu.
func (d *DB) rememberIndexes(in *dynamodb.CreateTableInput) {
	table := aws.ToString(in.TableName)
	for _, ix := range in.GlobalSecondaryIndexes {
		g := gsi{}
		for _, k := range ix.KeySchema {
			if k.KeyType == types.KeyTypeHash {
				g.hash = aws.ToString(k.AttributeName)
			} else {
				g.sort = aws.ToString(k.AttributeName)
			}
		}
		if ix.Projection != nil {
			g.projection = *ix.Projection
		}
		if d.indexes[table] == nil {
			d.indexes[table] = map[string]gsi{}
		}
		d.indexes[table][aws.ToString(ix.IndexName)] = g
	}
}

// queryIndex answers a Query on an index, under d.mu.
func (d *DB) queryIndex(ctx context.Context, in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
	table, name := aws.ToString(in.TableName), aws.ToString(in.IndexName)
	ix, ok := d.indexes[table][name]
	if !ok {
		return nil, validation(fmt.Sprintf("The table does not have the specified index: %s", name))
	}
	if aws.ToBool(in.ConsistentRead) {
		return nil, validation("Consistent reads are not supported on global secondary indexes")
	}
	if aws.ToString(in.ProjectionExpression) != "" || in.Select != "" || len(in.AttributesToGet) > 0 || in.KeyConditions != nil || in.QueryFilter != nil {
		// Nothing in the pipeline asks for these; refused rather than
		// answered differently from DynamoDB.
		return nil, validation("sim: a Query on an index takes a KeyConditionExpression and a FilterExpression only")
	}
	if in.Limit != nil && aws.ToString(in.FilterExpression) != "" {
		// DynamoDB's Limit counts the items read before the filter, which
		// the scan below cannot tell apart.
		return nil, validation("sim: a Query on an index takes a Limit or a FilterExpression, not both")
	}
	filter := "(" + aws.ToString(in.KeyConditionExpression) + ")"
	if f := aws.ToString(in.FilterExpression); f != "" {
		filter += " AND (" + f + ")"
	}
	scan, err := d.c.Scan(ctx, &dynamodb.ScanInput{TableName: in.TableName, FilterExpression: &filter,
		ExpressionAttributeNames: in.ExpressionAttributeNames, ExpressionAttributeValues: in.ExpressionAttributeValues})
	if err != nil {
		return nil, err
	}
	if len(scan.LastEvaluatedKey) > 0 {
		panic("sim: minidyn paged a Scan without a Limit")
	}
	tableKey := d.keys[table]
	items := slices.DeleteFunc(scan.Items, func(it map[string]types.AttributeValue) bool {
		// A sparse index holds only the items with every key attribute.
		return it[ix.hash] == nil || (ix.sort != "" && it[ix.sort] == nil)
	})
	pos := func(it map[string]types.AttributeValue) []types.AttributeValue {
		p := []types.AttributeValue{it[ix.hash], it[ix.sort]}
		for _, k := range tableKey {
			p = append(p, it[k])
		}
		return p
	}
	forward := in.ScanIndexForward == nil || *in.ScanIndexForward
	slices.SortFunc(items, func(a, b map[string]types.AttributeValue) int {
		c := comparePositions(pos(a), pos(b))
		if !forward {
			c = -c
		}
		return c
	})
	if start := in.ExclusiveStartKey; len(start) > 0 {
		at := pos(start)
		i := 0
		for i < len(items) {
			c := comparePositions(pos(items[i]), at)
			if !forward {
				c = -c
			}
			if c > 0 {
				break
			}
			i++
		}
		items = items[i:]
	}
	out := &dynamodb.QueryOutput{Items: []map[string]types.AttributeValue{}}
	read := 0
	for _, it := range items {
		p := project(it, ix, tableKey)
		out.Items = append(out.Items, p)
		read += itemSize(p)
		full := in.Limit != nil && len(out.Items) >= int(*in.Limit) || read >= maxPageBytes
		if full && len(out.Items) < len(items) {
			out.LastEvaluatedKey = map[string]types.AttributeValue{ix.hash: it[ix.hash]}
			if ix.sort != "" {
				out.LastEvaluatedKey[ix.sort] = it[ix.sort]
			}
			for _, k := range tableKey {
				out.LastEvaluatedKey[k] = it[k]
			}
			break
		}
	}
	out.Count, out.ScannedCount = int32(len(out.Items)), int32(len(out.Items))
	return out, nil
}

// project is the part of it that ix holds.
func project(it map[string]types.AttributeValue, ix gsi, tableKey []string) map[string]types.AttributeValue {
	if ix.projection.ProjectionType == types.ProjectionTypeAll {
		return copyItem(it)
	}
	names := append([]string{ix.hash, ix.sort}, tableKey...)
	if ix.projection.ProjectionType == types.ProjectionTypeInclude {
		names = append(names, ix.projection.NonKeyAttributes...)
	}
	out := map[string]types.AttributeValue{}
	for _, n := range names {
		if v, ok := it[n]; ok && n != "" {
			out[n] = v
		}
	}
	return copyItem(out)
}

// comparePositions orders two items' key values in turn, as DynamoDB
// orders an index: numbers by value, strings and binaries by their bytes
// (the table's key after the index's only makes the order total).
func comparePositions(a, b []types.AttributeValue) int {
	for i := range a {
		if c := compareKeyValues(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

func compareKeyValues(a, b types.AttributeValue) int {
	switch a := a.(type) {
	case *types.AttributeValueMemberN:
		if b, ok := b.(*types.AttributeValueMemberN); ok {
			x, okx := new(big.Rat).SetString(a.Value)
			y, oky := new(big.Rat).SetString(b.Value)
			if okx && oky {
				return x.Cmp(y)
			}
		}
	case *types.AttributeValueMemberS:
		if b, ok := b.(*types.AttributeValueMemberS); ok {
			return bytes.Compare([]byte(a.Value), []byte(b.Value))
		}
	case *types.AttributeValueMemberB:
		if b, ok := b.(*types.AttributeValueMemberB); ok {
			return bytes.Compare(a.Value, b.Value)
		}
	case nil:
		if b == nil {
			return 0
		}
	}
	panic(fmt.Sprintf("sim: index key values %#v and %#v are not two of one key type", a, b))
}

// Listed counts the items of table that index holds (a sparse index: those
// with its key attributes), with no latency, bill or outage: the run's own
// look at the pipeline's state, not a call of the pipeline's.
func (d *DB) Listed(table, index string) int {
	return len(d.listed(table, index))
}

// LatestListed is the greatest sort key (a number) among the items index
// holds, 0 for none: for the sweep index, the last time a lane it lists is
// due (Unix µs).
func (d *DB) LatestListed(table, index string) int64 {
	items := d.listed(table, index)
	d.mu.Lock()
	key := d.indexes[table][index].sort
	d.mu.Unlock()
	var latest int64
	for _, it := range items {
		if n, ok := it[key].(*types.AttributeValueMemberN); ok {
			if v, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
				latest = max(latest, v)
			}
		}
	}
	return latest
}

func (d *DB) listed(table, index string) []map[string]types.AttributeValue {
	d.mu.Lock()
	defer d.mu.Unlock()
	ix, ok := d.indexes[table][index]
	if !ok {
		panic(fmt.Sprintf("sim: table %s has no index %s", table, index))
	}
	filter, names := "attribute_exists(#h)", map[string]string{"#h": ix.hash}
	if ix.sort != "" {
		filter, names["#s"] = filter+" AND attribute_exists(#s)", ix.sort
	}
	scan, err := d.c.Scan(context.Background(), &dynamodb.ScanInput{TableName: &table, FilterExpression: &filter, ExpressionAttributeNames: names})
	if err != nil {
		panic(fmt.Sprintf("sim: scanning %s for index %s: %v", table, index, err))
	}
	return scan.Items
}
