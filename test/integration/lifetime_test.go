package integration

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// laneItem reads the lanes item of a property and kind straight from the
// state table.
func laneItem(t *testing.T, r *laneRig, pk string) map[string]ddbtypes.AttributeValue {
	t.Helper()
	out, err := emulator.DynamoDB(t).GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &r.stateTable, ConsistentRead: new(true),
		Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "sk": &ddbtypes.AttributeValueMemberS{Value: "lanes"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}
