package api

// Window is a top-level window of a desktop, as GET
// /v1/desktops/{id}/windows lists it. X, Y, Width and Height are its
// client area (the application's own pixels, inside the window manager's
// border and title bar); Frame is the whole window the screen shows, the
// decorations included. Both are in native pixels or in the space of the
// display_width and display_height the request declared.
type Window struct {
	// ID is the X window id ("0x01a00003"): what the window operations take.
	ID    string `json:"id"`
	Title string `json:"title"`
	// Class and Instance are WM_CLASS's parts ("XTerm" and "xterm").
	Class    string `json:"class"`
	Instance string `json:"instance"`
	// PID is the client's process id in the guest, 0 when it sets none.
	PID int `json:"pid"`
	// Workspace is the window manager's desktop number, -1 for all.
	Workspace int `json:"workspace"`
	X         int `json:"x"`
	Y         int `json:"y"`
	Width     int `json:"width"`
	Height    int `json:"height"`
	// Frame is the window with its title bar and border (equal to the
	// client area for an undecorated window).
	Frame   Rect `json:"frame"`
	Focused bool `json:"focused"`
}

// Rect is a rectangle on the screen: its top-left corner and its size.
type Rect struct {
	X      int `json:"x"`
	Y      int `json:"y"`
	Width  int `json:"width"`
	Height int `json:"height"`
}

// Windows answers GET /v1/desktops/{id}/windows, oldest window first.
type Windows struct {
	Windows []Window `json:"windows"`
}

// WindowPlacement is the body of POST
// /v1/desktops/{id}/windows/{window}/move (x and y: the client area's new
// top-left corner) and .../resize (width and height of the client area).
type WindowPlacement struct {
	X      *int `json:"x,omitempty"`
	Y      *int `json:"y,omitempty"`
	Width  *int `json:"width,omitempty"`
	Height *int `json:"height,omitempty"`
	// DisplayWidth and DisplayHeight declare the coordinate space, as on
	// the action API; absent means native pixels.
	DisplayWidth  int `json:"display_width,omitempty"`
	DisplayHeight int `json:"display_height,omitempty"`
}

// WindowClosed answers POST /v1/desktops/{id}/windows/{window}/close.
// Closed is false when the window was asked to close and is still open a
// few seconds later (the application may be asking to confirm).
type WindowClosed struct {
	ID     string `json:"id"`
	Closed bool   `json:"closed"`
}
