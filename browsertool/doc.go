// Package browsertool is the vocabulary of Anthropic's browser toolset
// (browser_toolset_20260801): its 31 members' inputs decoded strictly and
// checked against the bounds the docs state to the model, the tools
// entry's configs, the tool_result blocks and browser_state rules, and the
// rule for a turn of several calls (in order, stopping at the first
// failure). It sends nothing and knows no desktop: an Executor runs the
// calls. What each member does is in ../../shared/reference's summary of
// the published docs; where the docs leave a choice, the choice is named
// where it is made.
//
// drive runs the calls on a desktop's Chromium (Service.BrowserTurn);
// web's POST /v1/desktops/{id}/browser/anthropic takes a turn.
package browsertool
