// Package job is the unit of work a sync worker pushes to one OTA endpoint,
// and its wire form on the queues.
//
// A job carries its own scheduling state: the slot it reserved in the fleet
// bucket, its deadline, and the time it is due (NotBefore: the end of its
// lane's linger, or of a wait beyond SQS's 15-minute delay). A redelivered
// job therefore needs no lookup to know whether it may push now.
//
// Begin with Job; Encode gives a message body and Decode reads one back,
// refusing a message of another wire Version and passing over fields it
// does not know, so that the workers of two releases read each other's
// messages through a rolling deploy or a rollback.
package job
