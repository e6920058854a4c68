"""Small helpers shared by every part: JSON values, ids, time, lazy exports."""
