"""What the lab compute does: the service layer between handlers and store/report.
No HTTP objects here and no SQL: store/ for the lab's tables, report.py for Placement."""
