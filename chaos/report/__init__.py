"""The report role: Allure results, the HTML summary and the timeline pictures."""
