package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A Query on a table answers every item of its partition in sort key
// order, however it was written (an update, an import's put), and no
// other partition's: from one shard where minidyn answers it (a sort key
// condition), and from DB's own list of the partition where DB does (the
// whole partition; checkItems has minidyn answer it too and compares).
func TestQueryReadsEveryItemOfItsPartition(t *testing.T) {
	ctx := context.Background()
	db := NewDB(rand.New(rand.NewPCG(1, 2)), Latency{})
	db.checkItems = true
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String("c"),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	const props = 40
	sks := []string{"airbnb", "booking", "expedia"}
	loader := &connLoader{connReader: connReader{db}}
	for p := range props {
		pk := fmt.Sprintf("p%02d", p)
		for i, sk := range sks {
			key := map[string]types.AttributeValue{"pk": s(pk), "sk": s(sk)}
			if i == 1 {
				// The import's path: a put beside the updates.
				item := map[string]types.AttributeValue{"pk": s(pk), "sk": s(sk), "v": s(pk + sk)}
				_, err = loader.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
					"c": {{PutRequest: &types.PutRequest{Item: item}}}}})
			} else {
				_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("c"), Key: key,
					UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": s(pk + sk)}})
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name, cond string
		names      map[string]string
		backward   bool
	}{
		{"by a name", "#pk = :pk", map[string]string{"#pk": "pk"}, false},
		{"by the attribute", "pk = :pk", nil, false},
		{"backward", "pk = :pk", nil, true},
		{"with a sort key condition", "#pk = :pk AND sk > :none", map[string]string{"#pk": "pk"}, false},
	} {
		for p := range props {
			pk := fmt.Sprintf("p%02d", p)
			vals := map[string]types.AttributeValue{":pk": s(pk)}
			if c.name == "with a sort key condition" {
				vals[":none"] = s("")
			}
			out, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("c"), KeyConditionExpression: aws.String(c.cond),
				ExpressionAttributeNames: c.names, ExpressionAttributeValues: vals, ConsistentRead: aws.Bool(true),
				ScanIndexForward: aws.Bool(!c.backward)})
			if err != nil {
				t.Fatalf("%s, %s: %v", c.name, pk, err)
			}
			var got []string
			for _, it := range out.Items {
				got = append(got, it["pk"].(*types.AttributeValueMemberS).Value+"/"+it["v"].(*types.AttributeValueMemberS).Value)
			}
			var want []string
			for _, sk := range sks {
				want = append(want, pk+"/"+pk+sk)
			}
			if c.backward {
				slices.Reverse(want)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s, Query %s: %v, want %v", c.name, pk, got, want)
			}
		}
	}
}
