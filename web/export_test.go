package web

// SplitEventsForTest reads server-sent events as a fleet host does.
var SplitEventsForTest = splitEvents
