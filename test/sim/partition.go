package sim

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DB answers a Query for a whole partition (a key condition "pk = :v" and
// nothing else: no sort key condition, filter, projection, limit or page)
// from its own list of each partition's items, kept beside the items'
// sizes (setSize), and the items as DB keeps them (items.go). minidyn
// scans every item of the table in its shard and parses the key condition
// again for each: in the full steady run a property's connections Query
// (every execution environment's cache reads each property once a
// minute) was an eighth of the CPU. With checkItems set, minidyn answers
// too, and a difference panics.

// wholePartition is a key condition naming one partition and nothing else.
var wholePartition = regexp.MustCompile(`^\s*(#?\w+)\s*=\s*(:\w+)\s*$`)

// partKey names a partition in d.parts.
func partKey(table string, pk types.AttributeValue) (string, bool) {
	s, ok := pk.(*types.AttributeValueMemberS)
	if !ok {
		return "", false
	}
	return table + "\x00" + s.Value, true
}

// setSize records an item's size and its place in its partition, on every
// write that leaves the item stored.
func (d *DB) setSize(table string, key map[string]types.AttributeValue, size int) {
	sk := sizeKey(table, key)
	d.sizes[sk] = size
	names := d.keys[table]
	if len(names) < 2 {
		return
	}
	if pk, ok := partKey(table, key[names[0]]); ok {
		if d.parts[pk] == nil {
			d.parts[pk] = map[string]map[string]types.AttributeValue{}
		}
		if _, ok := d.parts[pk][sk]; !ok {
			d.parts[pk][sk] = keyOf(names, key)
		}
	}
}

// dropSize forgets an item that is no longer stored.
func (d *DB) dropSize(table string, key map[string]types.AttributeValue) {
	sk := sizeKey(table, key)
	delete(d.sizes, sk)
	if names := d.keys[table]; len(names) >= 2 {
		if pk, ok := partKey(table, key[names[0]]); ok {
			delete(d.parts[pk], sk)
		}
	}
}

// queryPartition answers in if it asks for a whole partition, under d.mu;
// ok is false where minidyn must answer.
func (d *DB) queryPartition(ctx context.Context, in *dynamodb.QueryInput) (out *dynamodb.QueryOutput, ok bool) {
	table := aws.ToString(in.TableName)
	names := d.keys[table]
	m := wholePartition.FindStringSubmatch(aws.ToString(in.KeyConditionExpression))
	if len(names) < 2 || m == nil || in.IndexName != nil || aws.ToString(in.FilterExpression) != "" ||
		aws.ToString(in.ProjectionExpression) != "" || in.Select != "" || len(in.AttributesToGet) > 0 || in.Limit != nil ||
		len(in.ExclusiveStartKey) > 0 || in.KeyConditions != nil || in.QueryFilter != nil || len(in.ExpressionAttributeValues) != 1 {
		return nil, false
	}
	name := m[1]
	if len(in.ExpressionAttributeNames) > 0 {
		n, named := in.ExpressionAttributeNames[name]
		if !named || len(in.ExpressionAttributeNames) != 1 {
			return nil, false // minidyn refuses what DynamoDB refuses
		}
		name = n
	}
	pk, ok := partKey(table, in.ExpressionAttributeValues[m[2]])
	if name != names[0] || !ok {
		return nil, false
	}
	var items []map[string]types.AttributeValue
	read := 0
	for _, key := range d.parts[pk] {
		it := d.stored(table, key)
		if it == nil {
			panic(fmt.Sprintf("sim: %s is listed in its partition but not stored", sizeKey(table, key)))
		}
		items = append(items, it)
		read += itemSize(it)
	}
	if read >= maxPageBytes {
		return nil, false // a page of its own: minidyn pages it
	}
	forward := in.ScanIndexForward == nil || *in.ScanIndexForward
	slices.SortFunc(items, func(a, b map[string]types.AttributeValue) int {
		c := compareKeyValues(a[names[1]], b[names[1]])
		if !forward {
			c = -c
		}
		return c
	})
	out = &dynamodb.QueryOutput{Items: items, Count: int32(len(items)), ScannedCount: int32(len(items))}
	if out.Items == nil {
		out.Items = []map[string]types.AttributeValue{}
	}
	if d.checkItems {
		d.checkQuery(ctx, table, in, out)
	}
	return out, true
}

// checkQuery panics if minidyn answers in with other items than out.
func (d *DB) checkQuery(ctx context.Context, table string, in *dynamodb.QueryInput, out *dynamodb.QueryOutput) {
	want, err := d.queryShard(table, in).Query(ctx, in)
	if err != nil {
		panic(fmt.Sprintf("sim: minidyn refused a whole partition's Query DB answered: %v", err))
	}
	if !d.laneTables[table] && !reflect.DeepEqual(want.Items, out.Items) && (len(want.Items) > 0 || len(out.Items) > 0) {
		panic(fmt.Sprintf("sim: a whole partition's Query of %s: DB answered %d items, minidyn %d (a write bypassed DB.setSize)",
			table, len(out.Items), len(want.Items)))
	}
}
