package sim

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
)

// DynamoDB's documented limits on a request, which minidyn does not
// enforce: a write that passes them on DB and not on DynamoDB would work
// in every simulation and be refused in production.
const (
	// maxExpressionBytes bounds each expression string of a request
	// (condition, update, projection, key condition, filter), measured as
	// DynamoDB measures it: the string's length in bytes, placeholders
	// as written, not what they stand for.
	maxExpressionBytes = 4 * 1024
	// maxTransactItems is the most actions a TransactWriteItems holds.
	maxTransactItems = 100
	// maxBatchGetKeys is the most keys a BatchGetItem reads, over all its tables.
	maxBatchGetKeys = 100
	// maxBatchWriteItems is the most puts and deletes a BatchWriteItem holds.
	maxBatchWriteItems = 25
)

// checkLimits refuses a request past DynamoDB's limits with the
// ValidationException DynamoDB answers, before anything is written. nil
// if in is within them (or of a kind it does not know).
func checkLimits(in any) error {
	switch in := in.(type) {
	case *dynamodb.UpdateItemInput:
		return expressions([]namedExpr{{"ConditionExpression", in.ConditionExpression}, {"UpdateExpression", in.UpdateExpression}})
	case *dynamodb.GetItemInput:
		return expressions([]namedExpr{{"ProjectionExpression", in.ProjectionExpression}})
	case *dynamodb.QueryInput:
		return expressions([]namedExpr{{"KeyConditionExpression", in.KeyConditionExpression},
			{"FilterExpression", in.FilterExpression}, {"ProjectionExpression", in.ProjectionExpression}})
	case *dynamodb.BatchGetItemInput:
		keys := 0
		for _, ka := range in.RequestItems {
			keys += len(ka.Keys)
			if err := expressions([]namedExpr{{"ProjectionExpression", ka.ProjectionExpression}}); err != nil {
				return err
			}
		}
		if keys > maxBatchGetKeys {
			return validation(fmt.Sprintf("Too many items requested for the BatchGetItem call: %d keys, at most %d", keys, maxBatchGetKeys))
		}
	case *dynamodb.BatchWriteItemInput:
		n := 0
		for _, reqs := range in.RequestItems {
			n += len(reqs)
		}
		if n > maxBatchWriteItems {
			return validation(fmt.Sprintf("1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Map value must satisfy constraint: [Member must have length less than or equal to %d] (%d requests)", maxBatchWriteItems, n))
		}
	case *dynamodb.TransactWriteItemsInput:
		if n := len(in.TransactItems); n > maxTransactItems {
			return validation(fmt.Sprintf("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to %d (%d items)", maxTransactItems, n))
		}
		for _, it := range in.TransactItems {
			var err error
			switch {
			case it.Update != nil:
				err = expressions([]namedExpr{{"ConditionExpression", it.Update.ConditionExpression}, {"UpdateExpression", it.Update.UpdateExpression}})
			case it.Put != nil:
				err = expressions([]namedExpr{{"ConditionExpression", it.Put.ConditionExpression}})
			case it.Delete != nil:
				err = expressions([]namedExpr{{"ConditionExpression", it.Delete.ConditionExpression}})
			case it.ConditionCheck != nil:
				err = expressions([]namedExpr{{"ConditionExpression", it.ConditionCheck.ConditionExpression}})
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// namedExpr is one expression of a request and its field's name.
type namedExpr struct {
	name string
	e    *string
}

// expressions refuses the first expression over maxExpressionBytes.
func expressions(es []namedExpr) error {
	for _, e := range es {
		if n := len(aws.ToString(e.e)); n > maxExpressionBytes {
			return validation(fmt.Sprintf("Invalid %s: Expression size has exceeded the maximum allowed size; expression size: %d, maximum: %d", e.name, n, maxExpressionBytes))
		}
	}
	return nil
}

func validation(msg string) error {
	return &smithy.GenericAPIError{Code: "ValidationException", Message: msg}
}
